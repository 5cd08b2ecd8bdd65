#include "conf/loader.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "conf/detail/checks.hpp"
#include "conf/detail/keys.hpp"

namespace rdmagate::conf {
namespace {

// Offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or npos. YAML text is Unicode; yaml-cpp passes other bytes through
// into values, and --check-config's dump of such a value did not load back to the same configuration
// (found by fuzz_config: a hugepage_dir holding 0xff bytes).
std::string hexByte(unsigned char b) {
  static constexpr char kHex[] = "0123456789abcdef";
  return {kHex[b >> 4], kHex[b & 0xf]};
}

std::size_t firstInvalidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    unsigned lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xc2 && b <= 0xdf) {
      n = 1;
    } else if (b >= 0xe0 && b <= 0xef) {
      n = 2;
      if (b == 0xe0) lo = 0xa0;  // overlong
      if (b == 0xed) hi = 0x9f;  // surrogates
    } else if (b >= 0xf0 && b <= 0xf4) {
      n = 3;
      if (b == 0xf0) lo = 0x90;  // overlong
      if (b == 0xf4) hi = 0x8f;  // above U+10FFFF
    } else {
      return i;
    }
    if (s.size() - i <= n) return i;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80u) || c > (k == 1 ? hi : 0xbfu)) return i;
    }
    i += n + 1;
  }
  return std::string_view::npos;
}

// Counts the documents of a YAML text, stopping at two, and remembers where the second one starts. Used
// instead of YAML::LoadAll, which on some malformed input never returns: yaml-cpp 0.7's parser keeps
// reporting empty documents without consuming input, and LoadAll collects them until memory runs out
// (fuzz_config found a 415-byte file that hung --check-config that way).
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++count_ == 2) second_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
  }
  void OnMapEnd() override {}

  // Throws what the parser throws (YAML::Exception), like YAML::Load.
  static DocumentCounter count(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentCounter h;
    while (h.count_ < 2 && parser.HandleNextDocument(h)) {
    }
    return h;
  }
  int documents() const noexcept { return count_; }
  const YAML::Mark& second() const noexcept { return second_; }

 private:
  int count_ = 0;
  YAML::Mark second_;
};

// A position in the text, 1-based.
struct TextPos {
  int line = 0;
  int column = 0;
};

// The first line up to `last_line` (1-based; 0: any) whose indentation holds a tab, at that tab. yaml-cpp
// reports such a line as "illegal map value" or "illegal tab when looking for indentation", neither of which
// says what to change. Lines holding only blanks or a comment are left out: a tab there is harmless.
std::optional<TextPos> tabInIndentation(std::string_view text, int last_line) {
  int line = 1;
  for (std::size_t start = 0; start < text.size(); ++line) {
    if (last_line > 0 && line > last_line) break;
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view l = text.substr(start, end - start);
    const std::size_t content = l.find_first_not_of(" \t\r");
    if (content != std::string_view::npos && l[content] != '#') {
      if (const std::size_t tab = l.find('\t'); tab < content) {
        return TextPos{line, static_cast<int>(tab) + 1};
      }
    }
    start = end + 1;
  }
  return std::nullopt;
}

// A flow collection's opening bracket ('[' or '{') and where it is.
struct FlowOpener {
  char bracket = 0;
  TextPos at;
};

// The flow collections still open at the end of line `last_line` (1-based; 0: the whole text), outermost
// first. yaml-cpp reports an unclosed one where it gave up looking, often the next line or the end of the
// file; the operator needs the line that opened it. A '[' or '{' opens one where YAML starts a value: at the
// start of a line, after "- ", after ": ", or inside another flow collection. Quoted strings and comments are
// skipped.
std::vector<FlowOpener> openFlows(std::string_view text, int last_line) {
  std::vector<FlowOpener> open;
  int line = 1, column = 1;
  bool value_start = true;  // outside flow: the next non-blank character starts a value
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '\n') {
      if (last_line > 0 && line >= last_line) break;
      ++line;
      column = 1;
      value_start = true;
      continue;
    }
    const TextPos here{line, column};
    ++column;
    const char prev = i == 0 ? '\n' : text[i - 1];
    const bool after_blank = prev == ' ' || prev == '\t' || prev == '\n';
    if (ch == '#' && after_blank) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (ch == ' ' || ch == '\t' || ch == '\r') continue;
    const bool token_start = !open.empty()
                                 ? (after_blank || prev == ',' || prev == '[' || prev == '{' || prev == ':')
                                 : value_start;
    if ((ch == '"' || ch == '\'') && token_start) {
      // To the closing quote ("\" escapes in double quotes, '' in single quotes), across lines.
      for (++i; i < text.size(); ++i) {
        if (text[i] == '\n') {
          ++line;
          column = 1;
          continue;
        }
        ++column;
        if (ch == '"' && text[i] == '\\') {
          ++i;
          ++column;
        } else if (text[i] == ch) {
          if (ch == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
            ++i;
            ++column;
          } else {
            break;
          }
        }
      }
      value_start = false;
      continue;
    }
    if ((ch == '[' || ch == '{') && token_start) {
      open.push_back(FlowOpener{ch, here});
      continue;
    }
    if (!open.empty()) {
      if (ch == ']' || ch == '}') open.pop_back();
      continue;
    }
    // Block context: a value starts after "- " and after ": " (or a colon at the end of the line).
    const char next = i + 1 < text.size() ? text[i + 1] : '\n';
    value_start = (ch == '-' && value_start && (next == ' ' || next == '\n')) ||
                  (ch == ':' && (next == ' ' || next == '\n' || next == '\r'));
  }
  return open;
}

using detail::Diagnostics;

std::vector<std::string_view> leafNames(std::string_view section) {
  std::vector<std::string_view> out;
  for (const detail::Key* k : detail::allKeys()) {
    if (k->section() == section) out.push_back(k->name());
  }
  return out;
}

// The last part of each section nested directly in `section`: "rados" for "store".
std::vector<std::string_view> childSections(std::string_view section) {
  std::vector<std::string_view> out;
  for (std::string_view s : detail::allSections()) {
    if (s.size() > section.size() + 1 && s.substr(0, section.size()) == section && s[section.size()] == '.' &&
        s.find('.', section.size() + 1) == std::string_view::npos) {
      out.push_back(s.substr(section.size() + 1));
    }
  }
  return out;
}

// A nested section whose last part is `name` ("store.rados" for "rados"), or empty.
std::string_view nestedSectionNamed(std::string_view name) {
  for (std::string_view s : detail::allSections()) {
    const std::size_t dot = s.rfind('.');
    if (dot != std::string_view::npos && s.substr(dot + 1) == name) return s;
  }
  return {};
}

std::vector<std::string_view> allPaths() {
  std::vector<std::string_view> out;
  for (const detail::Key* k : detail::allKeys()) out.push_back(k->path());
  return out;
}

// "did you mean" for a key that is not in the schema: a sibling with a near name first, then the same
// name in another section (the key was put under the wrong heading).
std::string unknownKeyMessage(std::string_view section, std::string_view name) {
  std::string msg = "unknown key";
  std::vector<std::string_view> candidates = leafNames(section);
  for (std::string_view child : childSections(section)) candidates.push_back(child);
  if (std::string near = detail::closestMatch(name, candidates); !near.empty()) {
    return msg + "; did you mean " + std::string(section) + "." + near + "?";
  }
  for (const detail::Key* k : detail::allKeys()) {
    if (k->name() == name) return msg + "; did you mean " + std::string(k->path()) + "?";
  }
  if (std::string_view nested = nestedSectionNamed(name); !nested.empty()) {
    return msg + "; did you mean " + std::string(nested) + "?";
  }
  return msg + " in section " + std::string(section);
}

std::string unknownSectionMessage(std::string_view name) {
  for (const detail::Key* k : detail::allKeys()) {
    if (k->name() == name) {
      return "unknown section; " + std::string(name) + " is a key: did you mean " + std::string(k->path()) +
             "?";
    }
  }
  if (std::string_view nested = nestedSectionNamed(name); !nested.empty()) {
    const std::size_t dot = nested.rfind('.');
    return "unknown section; " + std::string(name) + " is nested: write it under " +
           std::string(nested.substr(0, dot)) + " (did you mean " + std::string(nested) + "?)";
  }
  std::string msg = "unknown section";
  if (std::string near = detail::closestMatch(name, schemaSections()); !near.empty()) {
    msg += "; did you mean " + near + "?";
  } else {
    msg += "; sections are";
    for (std::string_view s : schemaSections()) msg += " " + std::string(s);
  }
  return msg;
}

// A mapping key must be a plain word. Reports and returns false otherwise.
bool keyName(const YAML::Node& key, const Origin& at, std::string_view parent, Diagnostics& diag,
             std::string* name) {
  if (!key.IsScalar()) {
    diag.error(at, std::string(parent), "a key must be a plain name, not a list or mapping");
    return false;
  }
  *name = key.Scalar();
  if (*name == "<<") {
    diag.error(at, std::string(parent), "merge keys (<<) are not supported; repeat the settings");
    return false;
  }
  return true;
}

class Loader {
 public:
  Loader(std::string_view source, const LoadOptions& options)
      : source_(source), options_(options), out_{Config{}, ConfigOrigins(std::string(source))} {}

  Result<LoadedConfig> run(std::string_view text) {
    parseText(text);
    applyOverrides();
    // Without a readable document there is nothing to cross-check: the defaults would only produce noise.
    if (!document_failed_) {
      detail::validateInto(out_.config, out_.origins, options_.host, diag_.failedKeys(), diag_.errors());
    }
    if (!diag_.errors().empty()) {
      detail::sortErrors(diag_.errors());
      return std::move(diag_.errors());
    }
    EalConfig& eal = out_.config.eal;
    if (eal.lcores.empty()) {
      eal.lcores = out_.config.dataplane.cores;
      eal.lcores.insert(eal.main_lcore);
    }
    return std::move(out_);
  }

 private:
  void fail(std::string message) {
    document_failed_ = true;
    diag_.error(fileOrigin(0, 0), "", std::move(message));
  }

  Origin fileOrigin(int line, int column) const { return Origin{OriginKind::kFile, source_, line, column}; }
  Origin at(const YAML::Node& n) const { return detail::originOf(fileOrigin(0, 0), n); }

  void parseText(std::string_view text) {
    if (text.size() > kMaxConfigBytes) {
      fail("file is " + std::to_string(text.size()) + " bytes; a config file is at most " +
           std::to_string(kMaxConfigBytes));
      return;
    }
    if (const std::size_t bad = firstInvalidUtf8(text); bad != std::string_view::npos) {
      const std::size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
      const std::size_t col = line_start == std::string_view::npos || bad == 0 ? bad : bad - line_start - 1;
      const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
      document_failed_ = true;
      diag_.error(fileOrigin(static_cast<int>(line), static_cast<int>(col) + 1), "",
                  "not UTF-8: byte 0x" + hexByte(static_cast<unsigned char>(text[bad])) +
                      " (a config file is UTF-8 text)");
      return;
    }
    try {
      const std::string owned(text);
      const DocumentCounter docs = DocumentCounter::count(owned);
      if (docs.documents() > 1) {
        document_failed_ = true;
        const YAML::Mark& m = docs.second();
        diag_.error(fileOrigin(m.line >= 0 ? m.line + 1 : 0, m.column >= 0 ? m.column + 1 : 0), "",
                    "a config file holds one YAML document; found more than one");
        return;
      }
      const YAML::Node root = YAML::Load(owned);
      if (docs.documents() == 0 || root.IsNull()) return;  // empty file or only comments: all defaults
      if (!checkQuotes(text, root)) return;
      parseRoot(root);
    } catch (const YAML::Exception& e) {
      document_failed_ = true;
      yamlError(text, e);
    } catch (const std::bad_alloc&) {
      fail("out of memory while parsing");
    } catch (const std::exception& e) {
      fail(std::string("internal error while parsing: ") + e.what());
    }
  }

  // yaml-cpp's message at its mark (0-based; -1: position unknown), unless the text shows a likelier cause
  // that its message does not name: a tab in the indentation, or a bracket never closed.
  void yamlError(std::string_view text, const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    if (const std::optional<TextPos> tab = tabInIndentation(text, line)) {
      diag_.error(
          fileOrigin(tab->line, tab->column), "",
          "invalid YAML: a tab in the indentation; YAML does not allow tabs for indentation; use spaces");
      return;
    }
    const bool seq = e.msg == YAML::ErrorMsg::END_OF_SEQ_FLOW;
    if (seq || e.msg == YAML::ErrorMsg::END_OF_MAP_FLOW) {
      const char want = seq ? '[' : '{';
      const std::vector<FlowOpener> open = openFlows(text, line);
      for (auto it = open.rbegin(); it != open.rend(); ++it) {
        if (it->bracket != want) continue;
        const std::string where =
            line > 0 ? " (the parser gave up looking at line " + std::to_string(line) + ")" : "";
        diag_.error(fileOrigin(it->at.line, it->at.column), "",
                    std::string("invalid YAML: this '") + want + "' is never closed; add the matching '" +
                        (seq ? ']' : '}') + "'" + where);
        return;
      }
    }
    diag_.error(fileOrigin(line, e.mark.column >= 0 ? e.mark.column + 1 : 0), "", "invalid YAML: " + e.msg);
  }

  // yaml-cpp 0.7 ends an unterminated quoted scalar at end of file instead of failing, which would fold
  // the rest of the file into one string value. Each quoted scalar's closing quote is looked for in the
  // source; only a scalar whose opening quote is seen at its mark and never closed is reported.
  bool checkQuotes(std::string_view text, const YAML::Node& root) {
    std::vector<std::size_t> line_start{0};
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') line_start.push_back(i + 1);
    }
    auto closed = [&](std::size_t open) {
      char q = text[open];
      for (std::size_t i = open + 1; i < text.size(); ++i) {
        if (q == '"' && text[i] == '\\') {
          ++i;
        } else if (text[i] == q) {
          if (q == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
            ++i;  // '' is an escaped quote inside single quotes
          } else {
            return true;
          }
        }
      }
      return false;
    };
    bool ok = true;
    std::vector<YAML::Node> stack{root};
    // Aliases share nodes; visiting each node once keeps a "billion laughs" file linear. A node is
    // identified by where it starts and its kind (a block mapping starts where its first key does).
    std::set<std::tuple<int, int, int>> seen;
    while (!stack.empty() && ok) {
      YAML::Node n = stack.back();
      stack.pop_back();
      if (!seen.emplace(n.Mark().line, n.Mark().column, static_cast<int>(n.Type())).second) continue;
      if (n.IsMap()) {
        for (auto it = n.begin(); it != n.end(); ++it) {
          stack.push_back(it->first);
          stack.push_back(it->second);
        }
      } else if (n.IsSequence()) {
        for (const auto& item : n) stack.push_back(item);
      } else if (n.IsScalar() && n.Tag() == "!") {
        const YAML::Mark m = n.Mark();
        if (m.line < 0 || static_cast<std::size_t>(m.line) >= line_start.size()) continue;
        std::size_t open = line_start[static_cast<std::size_t>(m.line)] + static_cast<std::size_t>(m.column);
        if (open < text.size() && (text[open] == '"' || text[open] == '\'') && !closed(open)) {
          document_failed_ = true;
          diag_.error(at(n), "", "invalid YAML: unterminated quoted string");
          ok = false;
        }
      }
    }
    return ok;
  }

  void parseRoot(const YAML::Node& root) {
    if (!root.IsMap()) {
      document_failed_ = true;
      diag_.error(at(root), "",
                  "the top level must be a mapping of sections (eal, device, listen, ...), not a " +
                      std::string(root.IsSequence() ? "list" : "single value"));
      return;
    }
    std::map<std::string, int> seen;
    for (auto it = root.begin(); it != root.end(); ++it) {
      Origin key_at = at(it->first);
      std::string name;
      if (!keyName(it->first, key_at, "", diag_, &name)) continue;
      if (auto [pos, fresh] = seen.emplace(name, key_at.line); !fresh) {
        diag_.error(key_at, name, "duplicate section (first at line " + std::to_string(pos->second) + ")");
        continue;
      }
      if (name.find('.') != std::string::npos && detail::isSection(name)) {
        diag_.error(key_at, name, dottedNameMessage(name));
        continue;
      }
      if (!detail::isSection(name)) {
        diag_.error(key_at, name, unknownSectionMessage(name));
        continue;
      }
      const YAML::Node body = it->second;  // a copy: it-> yields a temporary proxy
      if (sectionBody(name, key_at, body)) parseSection(name, body);
    }
  }

  // Whether a section's body holds keys to parse. "eal:" with nothing under it: every key keeps its
  // default. Anything but a mapping is an error, and the section's keys count as rejected.
  bool sectionBody(const std::string& section, const Origin& key_at, const YAML::Node& body) {
    if (body.IsNull()) return false;
    if (body.IsMap()) return true;
    diag_.error(
        key_at, section,
        "expected a mapping of keys, got " + std::string(body.IsSequence() ? "a list" : "a single value"));
    for (const detail::Key* k : detail::allKeys()) {
      if (detail::inSection(*k, section)) diag_.markFailed(k->path());
    }
    return false;
  }

  // "store.rados" or "rados.pool" written as one name: YAML has no dotted paths, and accepting them would
  // give a second spelling (and a way around the duplicate check).
  static std::string dottedNameMessage(std::string_view name) {
    const std::size_t dot = name.find('.');
    return "a name with a dot is not a path; nest it: " + std::string(name.substr(0, dot)) + ": then " +
           std::string(name.substr(dot + 1)) + ": under it";
  }

  void parseSection(const std::string& section, const YAML::Node& body) {
    std::map<std::string, int> seen;
    for (auto it = body.begin(); it != body.end(); ++it) {
      Origin key_at = at(it->first);
      std::string name;
      if (!keyName(it->first, key_at, section, diag_, &name)) continue;
      const std::string path = section + "." + name;
      const bool nested = detail::isSection(path);
      if (auto [pos, fresh] = seen.emplace(name, key_at.line); !fresh) {
        diag_.error(key_at, path,
                    std::string(nested ? "duplicate section" : "duplicate key") + " (first at line " +
                        std::to_string(pos->second) + ")");
        if (!nested) diag_.markFailed(path);
        continue;
      }
      if (name.find('.') != std::string::npos && (nested || detail::findKey(path) != nullptr)) {
        diag_.error(key_at, path, dottedNameMessage(name));
        continue;
      }
      if (nested) {
        const YAML::Node sub = it->second;
        if (sectionBody(path, key_at, sub)) parseSection(path, sub);
        continue;
      }
      const detail::Key* key = detail::findKey(path);
      if (key == nullptr) {
        diag_.error(key_at, path, unknownKeyMessage(section, name));
        continue;
      }
      if (!key->parse(it->second, key_at, out_.config, out_.origins, diag_)) diag_.markFailed(path);
    }
  }

  void applyOverrides() {
    for (const std::string& text : options_.overrides) {
      const Origin origin{OriginKind::kOverride, text, 0, 0};
      std::size_t eq = text.find('=');
      if (eq == std::string::npos || eq == 0) {
        diag_.error(origin, "", "expected key=value, e.g. --set dataplane.queue_depth=256");
        continue;
      }
      const std::string path = text.substr(0, eq);
      const detail::Key* key = detail::findKey(path);
      if (key == nullptr) {
        std::string msg = "unknown key";
        if (detail::isSection(path)) {
          msg = "is a section; set one key at a time, e.g. --set " + path + "." +
                std::string(leafNames(path).front()) + "=...";
        } else if (std::string near = detail::closestMatch(path, allPaths()); !near.empty()) {
          msg += "; did you mean " + near + "?";
        } else if (const std::size_t dot = path.rfind('.');
                   dot != std::string::npos && detail::isSection(path.substr(0, dot))) {
          // As in the file: the same name in another section ("store.pool" -> store.rados.pool).
          msg = unknownKeyMessage(path.substr(0, dot), path.substr(dot + 1));
        }
        diag_.error(origin, path, msg);
        continue;
      }
      if (firstInvalidUtf8(text) != std::string_view::npos) {
        diag_.error(origin, path, "not UTF-8 (a value is UTF-8 text)");
        diag_.markFailed(path);
        continue;
      }
      YAML::Node value;
      try {
        value = YAML::Load(text.substr(eq + 1));
      } catch (const YAML::Exception& e) {
        diag_.error(origin, path, "invalid YAML value: " + e.msg);
        diag_.markFailed(path);
        continue;
      } catch (const std::exception& e) {
        diag_.error(origin, path, std::string("invalid value: ") + e.what());
        diag_.markFailed(path);
        continue;
      }
      // A later valid override repairs an earlier bad one, like a later line would.
      if (key->parse(value, origin, out_.config, out_.origins, diag_)) {
        diag_.clearFailed(path);
      } else {
        diag_.markFailed(path);
      }
    }
  }

  std::string source_;
  const LoadOptions& options_;
  LoadedConfig out_;
  Diagnostics diag_;
  bool document_failed_ = false;
};

}  // namespace

Result<LoadedConfig> loadConfigText(std::string_view yaml, std::string_view source_name,
                                    const LoadOptions& options) {
  try {
    return Loader(source_name, options).run(yaml);
  } catch (const std::exception& e) {
    // Only allocation can get here; keep the promise that nothing escapes.
    return std::vector<ConfigError>{ConfigError{Origin{OriginKind::kFile, std::string(source_name), 0, 0}, "",
                                                std::string("error: ") + e.what()}};
  }
}

Result<LoadedConfig> loadConfigFile(const std::string& path, const LoadOptions& options) {
  auto cannot = [&](const std::string& why) -> Result<LoadedConfig> {
    return std::vector<ConfigError>{
        ConfigError{Origin{OriginKind::kFile, path, 0, 0}, "", "cannot read: " + why}};
  };
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return cannot(std::strerror(errno));
    std::string text;
    char buf[8192];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      text.append(buf, static_cast<std::size_t>(in.gcount()));
      if (text.size() > kMaxConfigBytes) break;  // loadConfigText reports the size
    }
    if (in.bad()) return cannot(std::strerror(errno));
    return loadConfigText(text, path, options);
  } catch (const std::exception& e) {
    return cannot(e.what());
  }
}

}  // namespace rdmagate::conf
