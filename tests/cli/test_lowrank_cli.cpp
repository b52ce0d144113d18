// kvc-calibrate / kvc-train / --lowrank as a user runs them: calibrate, evaluate at full rank (KL 0),
// interrupted + resumed training equals an uninterrupted run, foreign artifacts refused in one line.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>

#include "io/safetensors.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "util/files.h"
#include "util/hash.h"

namespace kvc {
namespace {

using test::bin;
using test::run_command;

void expect_clean_error(const test::CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  ASSERT_FALSE(r.err.empty());
  const std::string first = r.err.substr(0, r.err.find('\n'));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(first.find(needle), std::string::npos) << "expected '" << needle << "' in: " << first;
}

const std::string kModel = test::model_dir("stories260K");
const std::string kText = test::data_file("tinystories/tinystories_excerpt_30k.txt");

class LowRankCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::make_temp_dir("lowrank_cli");
    const auto r = run_command(bin("kvc-calibrate") + " -m " + kModel + " --data " + kText +
                               " --tokens 2000 --seq-len 128 --json -t 1 -o " + dir_ + "/bases.safetensors");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    summary_ = nlohmann::json::parse(r.out);
  }
  static std::string train_cmd(const std::string& extra) {
    return bin("kvc-train") + " -m " + kModel + " --bases " + dir_ + "/bases.safetensors --data " + kText +
           " --alpha 2 --steps 4 --warmup 1 --seq-len 32 --batch 1 --eval-every 1 --eval-windows 1 -t 1 --json "
           "--checkpoint-every 1 " +
           extra;
  }
  static inline std::string dir_;
  static inline nlohmann::json summary_;
};

TEST_F(LowRankCli, CalibrationReportsExplainedVarianceAndFullRankIsExact) {
  EXPECT_EQ(summary_["kv_dim"], 32);
  EXPECT_EQ(summary_["mean_centred"], false);
  for (const auto& l : summary_["explained"]) {
    const auto k = l["k"].get<std::vector<double>>();
    EXPECT_LE(k[0], k[1]);
    EXPECT_LE(k[1], k[2]);
    EXPECT_LE(k[2], 1.0 + 1e-9);
  }
  const auto r =
      run_command(bin("kvc-eval") + " kl -m " + kModel + " --file " + kText +
                  " --window 64 --max-windows 2 --json -t 1 --lowrank " + dir_ + "/bases.safetensors --rank 32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LT(j["kl"].get<double>(), 1e-6);  // an orthonormal basis at full rank loses nothing
  const auto half =
      run_command(bin("kvc-eval") + " kl -m " + kModel + " --file " + kText +
                  " --window 64 --max-windows 2 --json -t 1 --lowrank " + dir_ + "/bases.safetensors --rank 16");
  ASSERT_EQ(half.exit_code, 0) << half.err;
  EXPECT_NEAR(nlohmann::json::parse(half.out)["compression_ratio"].get<double>(), 0.5, 1e-9);
}

TEST_F(LowRankCli, ResumedTrainingEqualsUninterrupted) {
  const auto full = run_command(train_cmd("--checkpoint " + dir_ + "/a.ckpt -o " + dir_ + "/a.safetensors"));
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const auto part = run_command(train_cmd("--checkpoint " + dir_ + "/b.ckpt --stop-after 2"));
  ASSERT_EQ(part.exit_code, 0) << part.err;
  EXPECT_EQ(nlohmann::json::parse(part.out)["finished"], false);
  const auto rest = run_command(train_cmd("--checkpoint " + dir_ + "/b.ckpt --resume -o " + dir_ + "/b.safetensors"));
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  const auto a = st::SafetensorsFile::open(dir_ + "/a.safetensors");
  const auto b = st::SafetensorsFile::open(dir_ + "/b.safetensors");
  ASSERT_EQ(a->names(), b->names());
  double max_diff = 0, moved = 0;
  for (const auto& name : a->names()) {
    const auto n = a->info(name).numel();
    const auto* x = reinterpret_cast<const float*>(a->data(name));
    const auto* y = reinterpret_cast<const float*>(b->data(name));
    for (int64_t i = 0; i < n; ++i) max_diff = std::max(max_diff, std::abs(double(x[i]) - y[i]));
    if (name.find(".W") != std::string::npos)
      for (int64_t i = 0; i < n; ++i) moved += std::abs(x[i]);
  }
  EXPECT_LT(max_diff, 1e-5);
  EXPECT_GT(moved, 0.0) << "training did not change the gates";
  EXPECT_EQ(a->metadata().at("steps"), "4");
  // The resumed report holds the whole held-out curve, the evaluations before the interruption included
  // (kept in the checkpoint), as the uninterrupted run's does.
  const auto curve = [](const std::string& out) {
    std::vector<std::pair<int64_t, double>> points;
    const nlohmann::json report = nlohmann::json::parse(out);
    for (const auto& e : report["evals"]) points.emplace_back(e["step"], e["heldout_kl"]);
    return points;
  };
  const auto whole = curve(full.out), resumed = curve(rest.out);
  ASSERT_EQ(whole.size(), 4u);
  ASSERT_EQ(resumed.size(), whole.size()) << rest.out;
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(resumed[i].first, whole[i].first);
    EXPECT_NEAR(resumed[i].second, whole[i].second, 1e-6);
  }
  // Resuming with other settings is refused, naming the flag that differs and both values.
  expect_clean_error(run_command(train_cmd("--checkpoint " + dir_ + "/b.ckpt --resume --lr 0.1 -o /dev/null")),
                     "was written with --lr 0.005 (this run: 0.1); resume with the same flags");
  // The gates drive the adaptive cache.
  const auto eval = run_command(bin("kvc-eval") + " kl -m " + kModel + " --file " + kText +
                                " --window 64 --max-windows 1 --json -t 1 --lowrank " + dir_ + "/a.safetensors");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_GT(nlohmann::json::parse(eval.out)["compression_ratio"].get<double>(), 0.0);
}

// kvc-train's checkpoint: LibTorch's archive, then a trailer of magic, length and FNV-1a 64 hash. The
// tests edit the archive with LibTorch and seal it again as the format says.
std::string archive_of(const std::string& checkpoint_bytes) {
  return checkpoint_bytes.substr(0, checkpoint_bytes.size() - 24);
}
std::string sealed(const std::string& archive) {
  const uint64_t length = archive.size(), hash = fnv1a64(archive.data(), archive.size());
  return archive + "KVCCKPT1" + std::string(reinterpret_cast<const char*>(&length), 8) +
         std::string(reinterpret_cast<const char*>(&hash), 8);
}
// Loads the archive, lets `edit` change it, and writes it back sealed.
void edit_checkpoint(const std::string& checkpoint, const std::function<void(torch::jit::Module&)>& edit) {
  const std::string archive_path = checkpoint + ".zip";
  test::write_bytes(archive_path, archive_of(test::slurp(checkpoint)));
  torch::jit::Module archive = torch::jit::load(archive_path);
  edit(archive);
  archive.save(archive_path);
  test::write_bytes(checkpoint, sealed(test::slurp(archive_path)));
}

// A checkpoint whose evaluations table is not one (a foreign or hand-edited file with a valid signature)
// stops the resumed run in one line instead of reporting garbage steps.
TEST_F(LowRankCli, CheckpointWithMalformedEvaluationsIsRefused) {
  const std::string checkpoint = dir_ + "/malformed.ckpt";
  const auto part = run_command(train_cmd("--checkpoint " + checkpoint + " --stop-after 1"));
  ASSERT_EQ(part.exit_code, 0) << part.err;
  for (const torch::Tensor& evals : {torch::zeros({1, 3}, torch::kDouble), torch::zeros({1, 8}, torch::kFloat)}) {
    edit_checkpoint(checkpoint, [&](torch::jit::Module& archive) {
      ASSERT_TRUE(archive.hasattr("evals"));
      archive.setattr("evals", evals);
    });
    expect_clean_error(run_command(train_cmd("--checkpoint " + checkpoint + " --resume -o " + dir_ + "/m.safetensors")),
                       "the checkpoint's evaluations have an unexpected shape");
  }
}

// A damaged checkpoint is refused in one line, never read out of bounds or trained from: cut short, one
// byte changed, NaN in a parameter, a step counter outside the run, a parameter of the wrong shape.
TEST_F(LowRankCli, ADamagedCheckpointIsRefused) {
  const std::string good = dir_ + "/good.ckpt", bad = dir_ + "/bad.ckpt";
  const auto part = run_command(train_cmd("--checkpoint " + good + " --stop-after 1"));
  ASSERT_EQ(part.exit_code, 0) << part.err;
  const std::string bytes = test::slurp(good);
  const auto resume = [&] {
    return run_command(train_cmd("--checkpoint " + bad + " --resume -o " + dir_ + "/m.safetensors"));
  };
  test::write_bytes(bad, bytes.substr(0, bytes.size() - 1000));
  expect_clean_error(resume(), "--resume");
  test::write_bytes(bad, archive_of(bytes).substr(0, archive_of(bytes).size() / 2) + bytes.substr(bytes.size() - 24));
  expect_clean_error(resume(), "damaged");
  for (const size_t at : {size_t{100}, bytes.size() / 2, bytes.size() - 30}) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    test::write_bytes(bad, flipped);
    expect_clean_error(resume(), "checksum");
  }
  const auto edited = [&](const std::function<void(torch::jit::Module&)>& edit) {
    test::write_bytes(bad, bytes);
    edit_checkpoint(bad, edit);
    return resume();
  };
  expect_clean_error(
      edited([](torch::jit::Module& a) { a.setattr("p0", torch::full_like(a.attr("p0").toTensor(), std::nan(""))); }),
      "NaN");
  expect_clean_error(
      edited([](torch::jit::Module& a) { a.setattr("step", torch::tensor(int64_t{-(int64_t{1} << 62)})); }),
      "outside this run");
  expect_clean_error(edited([](torch::jit::Module& a) { a.setattr("p0", torch::zeros({3})); }), "shape");
}

// --loss kl fits the exact model's distribution and --loss ce the next token. From the same start and
// windows, the KL-trained gates end with a lower held-out KL while keeping no more of the cache (the
// retention penalty moves both runs, so a lower KL alone would not show which loss did better), the
// CE-trained ones with a lower held-out CE, and a checkpoint of one does not resume the other.
TEST_F(LowRankCli, EachLossWinsOnItsOwnHeldOutMeasure) {
  std::map<std::string, nlohmann::json> result;
  for (const std::string loss : {"ce", "kl"}) {
    const auto r =
        run_command(bin("kvc-train") + " -m " + kModel + " --bases " + dir_ + "/bases.safetensors --data " + kText +
                    " --alpha 4 --steps 40 -c 64 --eval-every 0 -t 1 --json --loss " + loss + " --checkpoint " + dir_ +
                    "/loss_" + loss + ".ckpt -o " + dir_ + "/gates_" + loss + ".safetensors");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    result[loss] = nlohmann::json::parse(r.out);
    ASSERT_EQ(st::SafetensorsFile::open(dir_ + "/gates_" + loss + ".safetensors")->metadata().at("loss"), loss);
  }
  EXPECT_LT(result["kl"]["final_kl"].get<double>(), result["ce"]["final_kl"].get<double>());
  EXPECT_LE(result["kl"]["final_retain_rate"].get<double>(), result["ce"]["final_retain_rate"].get<double>());
  EXPECT_LT(result["ce"]["final_ce"].get<double>(), result["kl"]["final_ce"].get<double>());
  expect_clean_error(
      run_command(bin("kvc-train") + " -m " + kModel + " --bases " + dir_ + "/bases.safetensors --data " + kText +
                  " --alpha 4 --steps 40 -c 64 --eval-every 0 -t 1 --loss kl --resume "
                  "--checkpoint " +
                  dir_ + "/loss_ce.ckpt -o " + dir_ + "/x.safetensors"),
      "was written with --loss ce (this run: kl)");
}

// --target matryoshka: rotated bases that stay orthogonal (full rank through the real low-rank cache is
// exact), cut at half rank by the cache they change the model less than the PCA basis they started from
// on the text they were trained on, and they are a bases file the rank search reads.
TEST_F(LowRankCli, MatryoshkaBasesBeatTheirPcaStartAtTheTrainedRank) {
  const std::string nested = dir_ + "/nested.safetensors", bases = dir_ + "/bases.safetensors";
  const auto r = run_command(bin("kvc-train") + " -m " + kModel + " --bases " + bases + " --data " + kText +
                             " --target matryoshka --matryoshka-shares 0.5 --eval-share 0.5 --loss kl "
                             "--steps 100 -c 64 --batch 2 --eval-every 0 -t 1 --json -o " +
                             nested);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_NEAR(report["final_retain_rate"].get<double>(), 0.5, 1e-9);
  const auto file = st::SafetensorsFile::open(nested);
  EXPECT_EQ(file->metadata().at("kind"), "kvc-lowrank-bases");
  EXPECT_EQ(file->metadata().at("trained"), "matryoshka");
  double moved = 0;
  const auto pca = st::SafetensorsFile::open(bases);
  for (const auto& name : file->names()) {
    if (name.find(".U") == std::string::npos || name.find("k_rotated") != std::string::npos) continue;
    // UᵀU = I in float64 from the stored float32 matrix.
    const int64_t d = 32;
    const auto* u = reinterpret_cast<const float*>(file->data(name));
    const auto* u0 = reinterpret_cast<const float*>(pca->data(name));
    double worst = 0;
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < d; ++k) dot += double(u[k * d + i]) * u[k * d + j];
        worst = std::max(worst, std::abs(dot - (i == j ? 1.0 : 0.0)));
      }
    EXPECT_LT(worst, 1e-4) << name;
    for (int64_t i = 0; i < d * d; ++i) moved += std::abs(double(u[i]) - u0[i]);
  }
  EXPECT_GT(moved, 1e-3) << "training did not rotate the bases";
  const auto kl = [&](const std::string& lowrank) {
    const auto e = run_command(bin("kvc-eval") + " kl -m " + kModel + " --file " + kText +
                               " --window 64 --max-windows 4 --json -t 1 --lowrank " + lowrank);
    EXPECT_EQ(e.exit_code, 0) << e.err;
    return nlohmann::json::parse(e.out)["kl"].get<double>();
  };
  EXPECT_LT(kl(nested + ":ranks=32"), 1e-6);
  const double trained = kl(nested + ":ranks=16"), start = kl(bases + ":ranks=16");
  EXPECT_LT(trained, 0.85 * start) << "trained " << trained << ", PCA " << start;
  // share= reads the ranks from the starting eigenvalues: the same allocation as the PCA file's.
  EXPECT_GT(kl(nested + ":share=0.5"), 0.0);
  expect_clean_error(run_command(train_cmd("--target matryoshka --matryoshka-shares 0.5,1.5 -o /dev/null")),
                     "--matryoshka-shares: each share must be in (0, 1], got 1.5");
  expect_clean_error(run_command(train_cmd("--target matryoshka --eval-share 0 -o /dev/null")),
                     "--eval-share must be in (0, 1], got 0");
  // Each target's own options are refused with the other, not ignored.
  const std::string plain = bin("kvc-train") + " -m " + kModel + " --bases " + bases + " --data " + kText +
                            " --steps 4 -c 32 -t 1 -o /dev/null ";
  expect_clean_error(run_command(plain + "--target matryoshka --alpha 4"),
                     "--alpha sets the gates' training; --target matryoshka trains no gates: leave --alpha out");
  expect_clean_error(run_command(plain + "--target matryoshka --init-bias 2"), "--init-bias sets the gates' training");
  expect_clean_error(run_command(plain + "--eval-share 0.5"),
                     "--eval-share applies to --target matryoshka; add --target matryoshka or leave --eval-share out");
}

// A sweep's low-rank rows are the caches `kvc-eval kl --lowrank` builds: the same KL, alone and under a press.
TEST_F(LowRankCli, SweepLowRankRowsEqualTheirOwnRuns) {
  const std::string out = test::make_temp_dir("lowrank_sweep"), bases = dir_ + "/bases.safetensors";
  const std::string common = " -m " + kModel + " -f " + kText + " -c 64 --max-windows 2 -t 1 --json";
  const auto sweep = run_command(bin("kvc-eval") + " sweep" + common +
                                 " --methods none --ratios 0.5 --tasks kl "
                                 "--lowrank " +
                                 bases + ":ranks=16 --lowrank-press snapkv --out-dir " + out);
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  std::map<std::string, nlohmann::json> cells;
  std::ifstream in(out + "/results.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    cells[j["method"].get<std::string>()] = j["result"];  // one ratio per method here
  }
  ASSERT_EQ(cells.size(), 3u) << test::slurp(out + "/results.jsonl");
  const auto own = [&](const std::string& flags) {
    const auto r = run_command(bin("kvc-eval") + " kl" + common + " --lowrank " + bases + " --rank 16" + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto alone = own(""), pressed = own(" --press snapkv --ratio 0.5");
  const auto& row = cells.at("lowrank/" + bases + ":ranks=16");
  EXPECT_DOUBLE_EQ(row["kl"].get<double>(), alone["kl"].get<double>());
  EXPECT_NEAR(row["compression_ratio"].get<double>(), 0.5, 1e-9);  // rank 16 of 32 dimensions
  const auto& both = cells.at("snapkv+lowrank/" + bases + ":ranks=16");
  EXPECT_DOUBLE_EQ(both["kl"].get<double>(), pressed["kl"].get<double>());
  EXPECT_GT(both["compression_ratio"].get<double>(), row["compression_ratio"].get<double>());

  // A press the low-rank cache cannot serve is refused before any cell runs.
  expect_clean_error(run_command(bin("kvc-eval") + " sweep" + common + " --methods none --tasks kl --lowrank " + bases +
                                 ":ranks=16 --lowrank-press d2o --out-dir " + test::make_temp_dir("lowrank_sweep_bad")),
                     "cannot be combined with --lowrank");
  expect_clean_error(run_command(bin("kvc-eval") + " sweep" + common +
                                 " --methods none --tasks kl --lowrank-press "
                                 "snapkv --out-dir " +
                                 test::make_temp_dir("lowrank_sweep_bad2")),
                     "--lowrank-press");
}

// "-" for artifacts: calibrate -> train -> generate through pipes gives the bytes and the text that the
// same steps give through files, and a damaged artifact on stdin is refused naming the flag it came by.
TEST_F(LowRankCli, ArtifactsFlowThroughPipesAsThroughFiles) {
  const std::string calibrate =
      bin("kvc-calibrate") + " -m " + kModel + " -f " + kText + " --tokens 2000 -c 128 -t 1 -o ";
  const std::string train =
      bin("kvc-train") + " -m " + kModel + " -f " + kText + " --steps 3 -c 32 --eval-every 0 -t 1 --bases ";
  const std::string generate = bin("kvc-generate") + " -m " + kModel +
                               " -p 'Once upon a time' -n 12 -q -t 1 "
                               "--json-out - --lowrank ";
  // run_command redirects the last command's stdin from /dev/null: a pipeline runs as one group.
  const auto pipeline = [](const std::string& commands) { return "{ " + commands + "; }"; };
  const std::string files = test::make_temp_dir("lowrank_pipes");
  ASSERT_EQ(run_command(calibrate + files + "/bases.safetensors").exit_code, 0);
  ASSERT_EQ(run_command(train + files + "/bases.safetensors -o " + files + "/gates.safetensors").exit_code, 0);
  const auto by_files = run_command(generate + files + "/gates.safetensors");
  ASSERT_EQ(by_files.exit_code, 0) << by_files.err;
  const auto piped = run_command(pipeline(calibrate + "- 2>/dev/null | " + train + "- -o - 2>/dev/null | tee " + files +
                                          "/piped.safetensors | " + generate + "-"));
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(test::slurp(files + "/piped.safetensors"), test::slurp(files + "/gates.safetensors"));
  EXPECT_EQ(nlohmann::json::parse(piped.out)["text"], nlohmann::json::parse(by_files.out)["text"]);
  expect_clean_error(run_command(pipeline("echo damaged | " + train + "- -o " + files + "/x.safetensors")),
                     "--bases: '-': header length");
  expect_clean_error(run_command(train + files + "/missing.safetensors -o " + files + "/x.safetensors"),
                     "--bases: file not found");
  expect_clean_error(run_command(pipeline("cat " + files + "/gates.safetensors | " + bin("kvc-generate") + " -m " +
                                          test::model_dir("kvc-micro-lm") + " -p hi -n 1 --lowrank -")),
                     "--lowrank - (standard input): made for another model");
  EXPECT_FALSE(kvc::file_exists(files + "/x.safetensors"));
}

TEST_F(LowRankCli, ForeignOrIncompleteArtifactsAreRefused) {
  expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + test::model_dir("kvc-micro-lm") + " --file " + kText +
                                 " --window 64 --max-windows 1 --lowrank " + dir_ + "/bases.safetensors --rank 4"),
                     "another model");
  expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + kModel + " --file " + kText +
                                 " --window 64 --max-windows 1 --lowrank " + dir_ + "/bases.safetensors"),
                     "--rank");
  expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + kModel + " --file " + kText + " --rank 4"), "--lowrank");
  // Presses the shared latent cannot serve: merging (D2O) and per-head budgets (Ada-KV).
  for (const std::string press : {"d2o", "ada"}) {
    expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + kModel + " --file " + kText + " --press " + press +
                                   " --ratio 0.5 --lowrank " + dir_ + "/bases.safetensors --rank 16"),
                       "cannot be combined with --lowrank");
  }
  expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + kModel + " --file " + kText + " --lowrank " + dir_ +
                                 "/bases.safetensors --rank 33"),
                     "outside 1..32");
  expect_clean_error(run_command(bin("kvc-train") + " -m " + kModel + " --bases " + kModel +
                                 "/model.safetensors --data " + kText + " -o /dev/null"),
                     "not a low-rank artifact");
}

}  // namespace
}  // namespace kvc
