#pragma once
// The one place a device backend is chosen (setup, control thread). Every backend the engine can run is an
// entry of `Backends`, in order of preference for `auto`; a backend is its own files (a datapath struct
// with a setup half) plus one entry here (and a detail::kNeeds line when it drives only some devices). Each
// datapath struct B provides:
//   B::kKind, B::kName                         its identity (config value dataplane.backend)
//   B::supports(ibv_context*)                  whether it can drive this device
//   B::make_device(ibv_context*, ibv_pd*)      its DeviceBackend (backend.hpp)
//   B::probe_max_inline(ibv_context*, want)    the inline size its QPs get (checked against the config)
//   the hot path of backend.hpp                stage_recv_st, stage_send_st, stage_rdma_st, flush_st, poll_st
//   optionally B::WithSrq                      the same with the receives on a core's shared receive queue
//                                              (SharedReceiveBackend, backend.hpp), when its setup half can
//                                              create one (DeviceBackend::create_srq)
// and CoreLoop<B, Service> (or CoreLoop<B::WithSrq, Service>) is the loop that runs on its CQs.

#include <infiniband/verbs.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "dataplane/backend/backend.hpp"
#include "dataplane/backend/mlx5_datapath.hpp"
#include "dataplane/backend/verbs_datapath.hpp"
#include "dataplane/core_loop.hpp"
#include "dataplane/core_runner.hpp"

namespace rdmagate::dataplane {

template <typename... B>
struct BackendList {};

// mlx5dv first: on an mlx5 NIC `auto` takes the direct path; every other device (rxe among them) gets verbs.
using Backends = BackendList<Mlx5Backend, VerbsBackend>;

namespace detail {

// What a backend needs of a device, for the error when it is named and the device is not that: an operator
// who set it by hand learns why, not only that it failed. Empty: any device (verbs).
template <typename B>
inline constexpr const char* kNeeds = "";
template <>
inline constexpr const char* kNeeds<Mlx5Backend> =
    "an mlx5 NIC (ConnectX or BlueField, driven by rdma-core's mlx5 provider)";

// Calls fn.template operator()<B>() for the backend `name` names ("auto": the first of the list that supports
// the device). False and *error when there is none.
template <typename Fn, typename... B>
bool with_backend(BackendList<B...>, std::string_view name, ibv_context* ctx, std::string* error, Fn&& fn) {
  bool done = false;
  const char* refused = nullptr;  // the backend named, which cannot drive this device
  const char* refused_needs = "";
  std::string known, usable;
  const bool any = name == "auto";
  const auto try_one = [&]<typename One>() {
    known += known.empty() ? One::kName : std::string(", ") + One::kName;
    const bool supported = One::supports(ctx);
    if (supported) usable += std::string(" or ") + One::kName;
    if (done || !(any || name == One::kName)) return;
    if (supported) {
      fn.template operator()<One>();
      done = true;
    } else if (!any) {
      refused = One::kName;
      refused_needs = kNeeds<One>;
    }
  };
  (try_one.template operator()<B>(), ...);
  if (done) return true;
  if (refused != nullptr) {
    *error = std::string("dataplane.backend ") + refused + " cannot drive device " +
             ibv_get_device_name(ctx->device);
    if (*refused_needs != '\0') *error += std::string(": ") + refused + " needs " + refused_needs;
    *error += "; set dataplane.backend to auto" + usable;
  } else if (any) {
    *error =
        "dataplane.backend auto: none of " + known + " can drive device " + ibv_get_device_name(ctx->device);
  } else {
    *error = "dataplane.backend " + std::string(name) + ": unknown (auto, " + known + ")";
  }
  return false;
}

// The loop of backend B on `res`: B::WithSrq's when the core has a shared receive queue (a backend without
// one never gets a core with one: CoreResources asks the backend for it).
template <typename B, typename Service>
std::unique_ptr<CoreRunner> make_one_runner(CoreResources& res, Service& svc) {
  if constexpr (requires { typename B::WithSrq; }) {
    if (res.srq() != nullptr)
      return std::make_unique<CoreRunnerOf<CoreLoop<typename B::WithSrq, Service>>>(res, svc);
  }
  if (res.srq() != nullptr) return nullptr;
  return std::make_unique<CoreRunnerOf<CoreLoop<B, Service>>>(res, svc);
}

template <typename Service, typename... B>
std::unique_ptr<CoreRunner> make_runner(BackendList<B...>, BackendKind kind, CoreResources& res, Service& svc) {
  std::unique_ptr<CoreRunner> r;
  ((kind == B::kKind && r == nullptr ? (void)(r = make_one_runner<B>(res, svc)) : void()), ...);
  return r;
}

}  // namespace detail

// `name` is "auto" (the first entry of Backends that supports the device) or a backend's kName. nullptr and
// *error when no backend of that name can drive the device.
inline std::unique_ptr<DeviceBackend> make_device_backend(std::string_view name, ibv_context* ctx, ibv_pd* pd,
                                                          std::string* error) {
  error->clear();
  std::unique_ptr<DeviceBackend> dev;
  detail::with_backend(Backends{}, name, ctx, error, [&]<typename B>() { dev = B::make_device(ctx, pd); });
  return dev;
}

// The largest inline send the backend `name` gets from the device, up to `want` (the device does not report
// it: the backend asks with throwaway QPs on a PD of their own, gone before it returns). nullopt and *error
// when no backend of that name drives the device; nullopt alone when the device refused every probe.
inline std::optional<std::uint32_t> probe_max_inline(std::string_view name, ibv_context* ctx, std::uint32_t want,
                                                     std::string* error) {
  error->clear();
  std::optional<std::uint32_t> got;
  detail::with_backend(Backends{}, name, ctx, error, [&]<typename B>() { got = B::probe_max_inline(ctx, want); });
  return got;
}

// The core loop of `kind` running `svc` on core `res`.
template <typename Service>
std::unique_ptr<CoreRunner> make_core_runner(BackendKind kind, CoreResources& res, Service& svc) {
  return detail::make_runner(Backends{}, kind, res, svc);
}

}  // namespace rdmagate::dataplane
