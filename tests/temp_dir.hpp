#pragma once
// A fresh directory under the system temp dir for one test, unique per process and object
// (tests of several programs can run at once), removed with everything in it at the end.
#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace depthlab_test {

class temp_dir {
public:
    /// tag names the test file in the path; create = false leaves the directory absent
    /// (for code that must create it itself).
    explicit temp_dir(const std::string& tag, bool create = true) {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() / ("depthlab_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        if (create) std::filesystem::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;

    [[nodiscard]] std::string str() const { return path.string(); }
    [[nodiscard]] std::string file(const std::string& name) const { return (path / name).string(); }
    /// Every file name in the directory, sorted.
    [[nodiscard]] std::vector<std::string> listing() const {
        std::vector<std::string> v;
        for (const auto& e : std::filesystem::directory_iterator(path)) v.push_back(e.path().filename().string());
        std::sort(v.begin(), v.end());
        return v;
    }

    std::filesystem::path path;
};

}  // namespace depthlab_test
