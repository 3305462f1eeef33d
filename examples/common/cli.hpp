#pragma once
// The examples' command lines, through CLI11 (Debian libcli11-dev): `--help` lists every flag
// with its default; a malformed, unknown or out-of-range value is one line on stderr and exit
// code 2. Every floating-point value must be finite ("nan" and "inf" parse as numbers, and
// CLI11's range and sign checks let NaN through: every comparison with it is false).
// Validators apply to the option declared just before them:
//
//     args.option("heads", o.heads, "attention heads").range(1, 256)
//         .option("lr", o.lr, "peak learning rate").positive()
//         .option("policy", o.policy, "halting policy").one_of({"act", "pondernet"});
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace examples {

class cli {
public:
    cli(std::string program, std::string about) : program_(program), app_(std::move(about), std::move(program)) {
        app_.get_formatter()->column_width(34);
    }

    template <class V>
    cli& option(const std::string& name, V& target, const std::string& help) {
        last_ = app_.add_option("--" + name, target, help)->capture_default_str();
        if constexpr (std::is_floating_point_v<V>) last_->check(finite());
        return *this;
    }
    cli& flag(const std::string& name, bool& target, const std::string& help) {
        last_ = app_.add_flag("--" + name, target, help);
        return *this;
    }
    /// The last option's value must be > 0.
    cli& positive() { return check(CLI::PositiveNumber); }
    /// The last option's value must be >= 0.
    cli& non_negative() { return check(CLI::NonNegativeNumber); }
    /// The last option's value must lie in [lo, hi].
    template <class N>
    cli& range(N lo, N hi) {
        return check(CLI::Range(lo, hi));
    }
    /// The last option's value must be one of `names`.
    cli& one_of(std::vector<std::string> names) { return check(CLI::IsMember(std::move(names))); }
    /// The last option may only be given together with --`other` (declared before it).
    cli& needs(const std::string& other) {
        last_->needs("--" + other);
        return *this;
    }
    /// The last option (a std::vector) takes comma-separated values: --rewind-k 0,2,4.
    cli& list() {
        last_->delimiter(',');
        return *this;
    }

    /// Parses argv; prints the help and exits 0 on --help, prints one line and exits 2 on an error.
    void parse(int argc, char** argv) {
        try {
            app_.parse(argc, argv);
        } catch (const CLI::CallForHelp& e) {
            std::exit(app_.exit(e));
        } catch (const CLI::ParseError& e) {
            std::fprintf(stderr, "%s: %s (see --help)\n", program_.c_str(), e.what());
            std::exit(2);
        }
    }

private:
    /// Rejects a value that reads as NaN or an infinity (a value that is no number at all is
    /// left to the option's own conversion, which names it).
    static CLI::Validator finite() {
        return CLI::Validator(
            [](std::string& text) -> std::string {
                char* end = nullptr;
                const double v = std::strtod(text.c_str(), &end);
                if (end == text.c_str() || std::isfinite(v)) return {};
                return "Value " + text + " is not a finite number";
            },
            "", "FINITE");
    }
    cli& check(const CLI::Validator& v) {
        last_->check(v);
        return *this;
    }
    std::string program_;
    CLI::App app_;
    CLI::Option* last_ = nullptr;
};

}  // namespace examples
