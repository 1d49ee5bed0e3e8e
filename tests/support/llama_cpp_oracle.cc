#include "support/llama_cpp_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "support/hf_folder.h"

namespace ferry::test {

namespace fs = std::filesystem;

std::string log_tail(const fs::path& log, std::size_t max_chars) {
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > max_chars ? text.substr(text.size() - max_chars) : text;
}

void LlamaCppOracleTest::SetUp() {
  python_ = reference_python(FERRY_SOURCE_DIR);
  converter_ = fs::path(FERRY_SOURCE_DIR) / ".venv" / "src" / "llama.cpp";
  if (const char* dir = std::getenv("FERRY_LLAMA_CPP_CONVERTER")) converter_ = dir;
  if (!python_ || !fs::exists(converter_ / "convert_hf_to_gguf.py"))
    GTEST_SKIP() << "no reference venv with llama.cpp's converter (scripts/venv)";
}

fs::path LlamaCppOracleTest::convert(const fs::path& folder, const std::string& outtype, bool vocab_none) {
  const fs::path out = folder.parent_path() / (folder.filename().string() + "." + outtype + ".gguf");
  std::vector<std::string> args{converter_.string(), folder.string(), out.string(), outtype};
  if (vocab_none) args.push_back("--vocab-none");
  EXPECT_EQ(run_reference_script(*python_, "gguf_convert.py", args, out.string() + ".log"), "")
      << log_tail(out.string() + ".log");
  return out;
}

nlohmann::json LlamaCppOracleTest::run_llama_cpp(const fs::path& gguf, const std::vector<int64_t>& prompt,
                                                 const std::vector<std::string>& extra) {
  std::string ids;
  for (int64_t id : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const fs::path json = gguf.string() + ".llama_cpp.json";
  std::vector<std::string> args{gguf.string(), json.string(), ids, "--f32-cache"};
  args.insert(args.end(), extra.begin(), extra.end());
  EXPECT_EQ(run_reference_script(*python_, "llama_cpp_logits.py", args, json.string() + ".log"), "")
      << log_tail(json.string() + ".log");
  std::ifstream in(json);
  return nlohmann::json::parse(in);
}

ComparedLogits compare_last_logits(models::CausalLM& model, const std::vector<int64_t>& prompt,
                                   const std::vector<double>& want) {
  const Tensor ids = Tensor::from_vector(prompt, {static_cast<int64_t>(prompt.size())});
  const auto got = model.logits(ids, model.make_cache(), 1).to_vector<float>();
  ComparedLogits c;
  if (got.size() != want.size() || got.empty()) return c;
  std::size_t ours = 0, theirs = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    c.diff = std::max(c.diff, std::abs(got[i] - want[i]));
    c.scale = std::max(c.scale, std::abs(want[i]));
    if (got[i] > got[ours]) ours = i;
    if (want[i] > want[theirs]) theirs = i;
  }
  c.same_greedy = ours == theirs;
  return c;
}

void expect_greedy_like_llama_cpp(models::CausalLM& model, const std::vector<int64_t>& prompt,
                                  const nlohmann::json& want, const std::string& what, double tolerance) {
  auto cache = model.make_cache();
  Tensor logits = model.logits(Tensor::from_vector(prompt, {static_cast<int64_t>(prompt.size())}), cache, 1);
  const auto ref = want["logits"].get<std::vector<double>>();
  const auto at_prompt = logits.to_vector<float>();
  ASSERT_EQ(at_prompt.size(), ref.size()) << what;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(at_prompt[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  EXPECT_LE(diff, tolerance * scale) << what << ": logits at the prompt";
  const auto ids = want["greedy"].get<std::vector<int64_t>>();
  ASSERT_FALSE(ids.empty()) << what;
  std::size_t equal = 0;
  for (std::size_t step = 0; step < ids.size(); ++step) {
    const auto row = logits.to_vector<float>();
    const int64_t next = std::max_element(row.begin(), row.end()) - row.begin();
    if (next != ids[step]) {
      EXPECT_LE(row[next] - row[ids[step]], 2 * diff)
          << what << ", step " << step << ": ferry picks " << next << ", llama.cpp " << ids[step];
      break;
    }
    ++equal;
    logits = model.logits(Tensor::from_vector(std::vector<int64_t>{next}, {1}), cache, 1);
  }
  EXPECT_GE(equal, ids.size() / 2) << what << ": too few greedy steps were decisive to compare";
  std::printf("%s: logits max diff %.2e (max |logit| %.2f) at the prompt; %zu of %zu greedy ids equal to llama.cpp's\n",
              what.c_str(), diff, scale, equal, ids.size());
}

}  // namespace ferry::test
