// PyPI's LibTorch exports a std::filesystem of its own (an older libstdc++'s, linked in statically). A
// program resolves each symbol in the first library of its list that defines it, so our programs list
// libstdc++ before LibTorch (CMakeLists.txt): with LibTorch first, std::filesystem::remove_all ran
// LibTorch's copy and crashed. Holds with either LibTorch; fails with the PyPI one if the order is lost.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

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

// A g++ with only a static libstdc++ cannot list it before LibTorch, so configuring with it is refused
// when LibTorch exports std::filesystem. Fed here: libstdc++.so itself stands for such a LibTorch (it
// exports remove_all), a wrapper answering as a g++ without a shared libstdc++ for such a compiler.
TEST(LinkOrder, ACompilerWithoutASharedLibstdcxxIsRefusedAtConfigure) {
  const std::string dir = test::make_temp_dir("kvc-static-cxx");
  const std::string fake = dir + "/g++";
  test::write_bytes(fake,
                    "#!/bin/sh\ncase \"$*\" in *-print-file-name=libstdc++.so*) echo libstdc++.so; exit 0;; esac\n"
                    "exec g++ \"$@\"\n");
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  std::string libstdcxx = test::run_command("g++ -print-file-name=libstdc++.so").out;
  libstdcxx.erase(libstdcxx.find_last_not_of("\n") + 1);
  const auto configure = [&](const std::string& torch_library, const std::string& cxx) {
    return test::run_command("cmake -DKVC_TORCH_LIBRARY=" + torch_library + " -DKVC_CXX=" + cxx + " -P " +
                             std::string(KVC_SOURCE_DIR) + "/cmake/require_shared_libstdcxx.cmake");
  };
  const auto refused = configure(libstdcxx, fake);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("has no shared libstdc++"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("-DCMAKE_CXX_COMPILER="), std::string::npos) << refused.err;
  EXPECT_EQ(configure(libstdcxx, "g++").exit_code, 0) << "a g++ with a shared libstdc++ is accepted";
  EXPECT_EQ(configure("/bin/sh", fake).exit_code, 0) << "a LibTorch without std::filesystem needs no check";
}

}  // namespace
}  // namespace kvc
