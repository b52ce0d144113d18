// PyPI's LibTorch exports a std::filesystem of its own (an older libstdc++'s, linked in statically). A
// program resolves each symbol in the first library of its list that defines it, so our programs list
// libstdc++ before LibTorch (CMakeLists.txt): with LibTorch first, std::filesystem::remove_all ran
// LibTorch's copy and crashed. Holds with either LibTorch; fails with the PyPI one if the order is lost.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "support/run_command.h"

namespace kvc {
namespace {

TEST(LinkOrder, StdFilesystemIsLibstdcxxOwn) {
  EXPECT_EQ(at::ones({2}).sum().item<double>(), 2.0);  // LibTorch is loaded and in use
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  const RemoveAll remove_all = &std::filesystem::remove_all;
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(remove_all), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libstdc++"), std::string::npos)
      << "std::filesystem::remove_all resolves to " << info.dli_fname;

  const std::string dir = test::make_temp_dir("kvc-link-order");
  std::filesystem::create_directories(dir + "/a/b");
  std::ofstream(dir + "/a/b/file") << "x";
  std::error_code ec;
  EXPECT_EQ(remove_all(dir, ec), 4u) << ec.message();  // the folder, a, b and the file
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace kvc
