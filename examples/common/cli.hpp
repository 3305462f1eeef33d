#pragma once
// A small flag parser shared by the examples: --name value pairs and boolean --name flags,
// with a generated usage text. Unknown flags and malformed numbers are errors, not ignored.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace examples {

class cli {
public:
    explicit cli(std::string program, std::string about) : program_(std::move(program)), about_(std::move(about)) {}

    template <class V>
    cli& option(const std::string& name, V& target, const std::string& help) {
        opts_.push_back({name, help, describe(target), [&target, name](const std::string& s) { parse(s, target, name); }, false});
        return *this;
    }
    cli& flag(const std::string& name, bool& target, const std::string& help) {
        opts_.push_back({name, help, target ? "on" : "off", [&target](const std::string&) { target = true; }, true});
        return *this;
    }
    /// Parses argv; prints usage and exits on --help or on an error.
    void parse(int argc, char** argv) {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "--help" || a == "-h") usage(stdout, 0);
            const opt* o = find(a);
            if (!o) fail("unknown option " + a);
            if (o->is_flag) {
                o->set("");
                continue;
            }
            if (i + 1 >= argc) fail("option " + a + " needs a value");
            try {
                o->set(argv[++i]);
            } catch (const std::exception& e) {
                fail(e.what());
            }
        }
    }

private:
    struct opt {
        std::string name, help, def;
        std::function<void(const std::string&)> set;
        bool is_flag;
    };
    const opt* find(const std::string& a) const {
        for (const auto& o : opts_)
            if ("--" + o.name == a) return &o;
        return nullptr;
    }
    [[noreturn]] void fail(const std::string& msg) const {
        std::fprintf(stderr, "%s: %s\n\n", program_.c_str(), msg.c_str());
        usage(stderr, 2);
    }
    [[noreturn]] void usage(std::FILE* f, int code) const {
        std::fprintf(f, "usage: %s [options]\n%s\n\noptions:\n", program_.c_str(), about_.c_str());
        for (const auto& o : opts_) std::fprintf(f, "  --%-18s %s (default: %s)\n", o.name.c_str(), o.help.c_str(), o.def.c_str());
        std::exit(code);
    }
    static std::string describe(const std::string& v) { return v.empty() ? "\"\"" : v; }
    template <class V>
    static std::string describe(const V& v) { return std::to_string(v); }
    static void parse(const std::string& s, std::string& t, const std::string&) { t = s; }
    template <class V>
    static void parse(const std::string& s, V& t, const std::string& name) {
        std::size_t used = 0;
        try {
            if constexpr (std::is_floating_point_v<V>) t = static_cast<V>(std::stod(s, &used));
            else if constexpr (std::is_unsigned_v<V>) t = static_cast<V>(std::stoull(s, &used));
            else t = static_cast<V>(std::stoll(s, &used));
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != s.size() || s.empty()) throw std::invalid_argument("--" + name + ": '" + s + "' is not a number");
    }

    std::string program_, about_;
    std::vector<opt> opts_;
};

}  // namespace examples
