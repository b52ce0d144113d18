// RULER's 13 tasks by name, with synthetic.yaml's settings.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tasks/ruler_generators.h"
#include "tasks/ruler_tasks.h"
#include "util/error.h"

namespace kvc {

namespace {

using H = RulerHaystack;
using V = RulerValue;

const std::vector<RulerNiahConfig>& niah_configs() {
  static const std::vector<RulerNiahConfig> configs = {
      {"niah_single_1", H::kNoise, V::kWords, V::kNumbers, 1, 1, 1},
      {"niah_single_2", H::kEssay, V::kWords, V::kNumbers, 1, 1, 1},
      {"niah_single_3", H::kEssay, V::kWords, V::kUuids, 1, 1, 1},
      {"niah_multikey_1", H::kEssay, V::kWords, V::kNumbers, 4, 1, 1},
      {"niah_multikey_2", H::kNeedle, V::kWords, V::kNumbers, 1, 1, 1},
      {"niah_multikey_3", H::kNeedle, V::kUuids, V::kUuids, 1, 1, 1},
      {"niah_multivalue", H::kEssay, V::kWords, V::kNumbers, 1, 4, 1},
      {"niah_multiquery", H::kEssay, V::kWords, V::kNumbers, 1, 1, 4},
  };
  return configs;
}

const RulerNiahConfig* find_niah(const std::string& name) {
  const auto& configs = niah_configs();
  auto it = std::find_if(configs.begin(), configs.end(), [&](const RulerNiahConfig& c) { return name == c.task; });
  return it == configs.end() ? nullptr : &*it;
}

void check_known(const std::string& name) {
  KVC_CHECK(is_ruler_task(name), "unknown RULER task '{}' (valid: {})", name, fmt::join(ruler_task_names(), ", "));
}

}  // namespace

const std::vector<std::string>& ruler_task_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& config : niah_configs()) out.emplace_back(config.task);
    for (const char* name : {"vt", "cwe", "fwe", "qa_1", "qa_2"}) out.emplace_back(name);
    return out;
  }();
  return names;
}

bool is_ruler_task(const std::string& name) {
  const auto& names = ruler_task_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

RulerSource ruler_task_source(const std::string& name) {
  check_known(name);
  if (name == "qa_1") return RulerSource::kSquad;
  if (name == "qa_2") return RulerSource::kHotpotQa;
  const RulerNiahConfig* niah = find_niah(name);
  return niah != nullptr && niah->haystack == H::kEssay ? RulerSource::kEssay : RulerSource::kNone;
}

int64_t ruler_tokens_to_generate(const std::string& name) {
  check_known(name);
  if (find_niah(name) != nullptr) return 128;
  if (name == "vt") return 30;
  if (name == "cwe") return 120;
  if (name == "fwe") return 50;
  return 32;  // qa
}

TaskSample make_ruler_sample(const std::string& name, const RulerRequest& request, const TokenCounter& counter,
                             const RulerInputs& inputs) {
  check_known(name);
  if (const RulerNiahConfig* niah = find_niah(name)) {
    KVC_CHECK(niah->haystack != H::kEssay || !inputs.essay.empty(),
              "{}: needs the essay haystack (data/text/pg_essays)", name);
    return make_ruler_niah(*niah, request, counter, inputs.essay);
  }
  if (name == "vt") return make_ruler_vt(request, counter);
  if (name == "cwe") return make_ruler_cwe(request, counter);
  if (name == "fwe") return make_ruler_fwe(request, counter);
  const RulerQaData* data = name == "qa_1" ? inputs.squad : inputs.hotpotqa;
  KVC_CHECK(data != nullptr, "{}: needs its QA data set (--qa-dir)", name);
  return make_ruler_qa(name, *data, request, counter);
}

}  // namespace kvc
