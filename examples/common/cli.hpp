#pragma once
// The examples' command lines, through CLI11 (Debian libcli11-dev): `--help` lists every flag
// with its default, in sections; a malformed, unknown or out-of-range value is one line on
// stderr and exit code 2. Every floating-point value must be finite ("nan" and "inf" parse as
// numbers, and CLI11's range and sign checks let NaN through: every comparison with it is
// false). Validators apply to the option declared just before them:
//
//     args.section("Model")
//         .option("heads", o.heads, "attention heads").range(1, 256)
//         .section("Optimisation")
//         .option("lr", o.lr, "peak learning rate").positive()
//         .option("policy", o.policy, "halting policy").one_of({"act", "pondernet"});
//
// Reproducible runs: every program takes `--config FILE` (TOML, `key = value` with the flags'
// names), and save_config(OUT) writes every option's resolved value to OUT/config.toml, so
// `prog --config runs/x/config.toml --out runs/y` repeats run x. Flags on the command line
// override the file. A config is checked as strictly as a command line: an unknown key, a
// value of the wrong type, out of range or not finite is one line naming the key, exit 2.
// A flag given twice takes its last value (a list flag collects both).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <functional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <depthlab/core/error.hpp>
#include <depthlab/io/atomic_file.hpp>

namespace examples {

/// Options a saved config leaves out (written as comments): where a run writes, whether it
/// continues an earlier one and how it was launched describe this invocation, not what the
/// run computes — a config that carried --out would send a repeat's outputs over the
/// original's.
inline bool describes_invocation(const std::string& name) { return name == "out" || name == "resume" || name == "distributed"; }

/// The flags that size a program's memory with their values, for an out-of-memory message
/// (" (the sizes come from --batch 32 --seq-len 128)"); set by cli::parse from cli::sizes().
inline std::string& sizing_flags() {
    static std::string text;
    return text;
}
/// The command that started the program, its arguments joined by spaces (summary.json and the
/// reports name it).
inline std::string command_line(int argc, char** argv) {
    std::string s;
    for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
    return s;
}
/// What a program prints for an error: its message, and for an allocation failure
/// (depthlab::memory_error, naming the tensor, or std::bad_alloc) the flags behind the sizes.
inline std::string failure_message(const std::exception& e) {
    const bool named = dynamic_cast<const depthlab::memory_error*>(&e) != nullptr;
    if (!named && !dynamic_cast<const std::bad_alloc*>(&e)) return e.what();
    const std::string what = named ? e.what() : "out of memory (" + std::string(e.what()) + ")";
    return what + (sizing_flags().empty() ? "" : "; the sizes come from " + sizing_flags() + ": lower them");
}

inline constexpr const char* no_divergence_guard_help =
    "turn off the divergence guard (train::divergence_guard: a loss far above its running level or runaway weights stop the run; "
    "the NaN guard stays)";

class cli {
public:
    cli(std::string program, std::string about) : program_(program), app_(std::move(about), std::move(program)) {
        app_.get_formatter()->column_width(34);
        app_.set_config("--config", "", "read options from this TOML file (`key = value`, the flags' names; OUT/config.toml of a run "
                                        "repeats it); flags on the command line override it")
            ->group("Configuration");
        app_.allow_config_extras(CLI::config_extras_mode::error);
    }

    /// The options declared from here on form this section of --help and of config.toml.
    cli& section(std::string name) {
        section_ = std::move(name);
        return *this;
    }

    template <class V>
    cli& option(const std::string& name, V& target, const std::string& help) {
        last_ = app_.add_option("--" + name, target, help)->capture_default_str()->group(section_);
        last_wins<V>();
        check_kind<V>();
        saved_.push_back({name, section_, [&target] { return toml_value(target); }, last_});
        return *this;
    }
    cli& flag(const std::string& name, bool& target, const std::string& help) {
        last_ = app_.add_flag("--" + name, target, help)->group(section_);
        last_wins<bool>();
        saved_.push_back({name, section_, [&target] { return toml_value(target); }, last_});
        return *this;
    }
    /// A former name of an option declared before: still accepted, with a warning naming the
    /// current one; hidden from --help and never written to config.toml. Validators after it
    /// apply to it (repeat the option's own).
    template <class V>
    cli& deprecated_alias(const std::string& old_name, const std::string& name, V& target) {
        CLI::Option* current = app_.get_option("--" + name);
        last_ = app_.add_option("--" + old_name, target)->group("")->excludes(current);
        last_wins<V>();
        check_kind<V>();
        last_->each([program = program_, old_name, name](const std::string&) {
            std::fprintf(stderr, "%s: warning: --%s is deprecated, use --%s\n", program.c_str(), old_name.c_str(), name.c_str());
        });
        return *this;
    }
    /// The last option's value must be > 0.
    cli& positive() { return check(bounded(0, HUGE_VAL, /*open_low=*/true)); }
    /// The last option's value must be >= 0.
    cli& non_negative() { return check(bounded(0, HUGE_VAL, false)); }
    /// The last option's value must lie in [lo, hi].
    template <class N>
    cli& range(N lo, N hi) {
        return check(bounded(static_cast<double>(lo), static_cast<double>(hi), false));
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

    /// The flags that size memory (declared before; others are ignored), named with their
    /// values when a tensor cannot be allocated (failure_message).
    cli& sizes(std::vector<std::string> names) {
        sizes_ = std::move(names);
        return *this;
    }

    /// Parses argv (and the --config file); prints the help and exits 0 on --help, prints one
    /// line and exits 2 on an error.
    void parse(int argc, char** argv) {
        try {
            app_.parse(argc, argv);
            std::string text;
            for (const std::string& n : sizes_)
                for (const saved_option& s : saved_)
                    if (s.name == n) text += (text.empty() ? "--" : " --") + n + " " + s.value();
            sizing_flags() = text;
        } catch (const CLI::CallForHelp& e) {
            std::exit(app_.exit(e));
        } catch (const CLI::ConfigError& e) {
            // CLI11 says "INI was not able to parse <key>" for a key no option has
            std::string what = e.what();
            const std::string prefix = "INI was not able to parse ";
            if (what.rfind(prefix, 0) == 0) what = "unknown key '" + what.substr(prefix.size()) + "' (no such option; see --help)";
            std::fprintf(stderr, "%s: --config %s: %s\n", program_.c_str(), config_path().c_str(), what.c_str());
            std::exit(2);
        } catch (const CLI::FileError& e) {
            std::fprintf(stderr, "%s: --config: %s\n", program_.c_str(), e.what());
            std::exit(2);
        } catch (const CLI::ParseError& e) {
            const std::string from = config_path().empty() ? "" : " (command line or --config " + config_path() + ")";
            std::fprintf(stderr, "%s: %s%s (see --help)\n", program_.c_str(), e.what(), from.c_str());
            std::exit(2);
        }
    }

    /// The resolved options as TOML, one `key = value` line per option in declaration order,
    /// a comment line per section; --config reads it back to the same values (floating-point
    /// numbers in the shortest form that round-trips exactly).
    std::string config_text() const {
        std::string text = "# " + program_ + ": the resolved options of a run (" + program_ +
                           " --config THIS_FILE --out DIR repeats it; flags override it)\n";
        std::string section = "\n";
        std::string unwritable;
        for (const saved_option& s : saved_) {
            if (s.section != section) {
                section = s.section;
                text += "\n# ---- " + (section.empty() ? std::string("options") : section) + "\n";
            }
            const std::string value = s.value();
            if (value.empty() && s.option->count() > 0) unwritable += " --" + s.name;
            if (value.empty()) text += "# " + s.name + ": not written (its default, or a value a config cannot hold)\n";
            else if (describes_invocation(s.name)) text += "# " + s.name + " = " + value + "  (not applied from a config)\n";
            else text += s.name + " = " + value + "\n";
        }
        if (!unwritable.empty())
            std::fprintf(stderr, "%s: warning: the saved config cannot hold the value of%s (a '#', a line break or both quote kinds); "
                                 "give it on the command line when repeating the run\n",
                         program_.c_str(), unwritable.c_str());
        return text;
    }
    /// Writes config_text() to <dir>/config.toml (creating dir), atomically, before the run
    /// starts. A different config.toml already there (a run resumed with other flags) is kept
    /// as config.previous.toml. An error is one line naming the path, exit 2.
    void save_config(const std::string& dir) const {
        if (dir.empty()) return;  // no output folder: nothing is written
        const std::string path = dir + "/config.toml", text = config_text();
        try {
            std::filesystem::create_directories(dir);
            if (std::filesystem::exists(path)) {
                std::ifstream in(path, std::ios::binary);
                const std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
                if (before != text) depthlab::io::write_file_atomically(dir + "/config.previous.toml", before, "keep the earlier config");
            }
            depthlab::io::write_file_atomically(path, text, "save the run's config");
        } catch (const std::exception& e) {  // io_error, filesystem_error
            std::fprintf(stderr, "%s: cannot write %s: %s\n", program_.c_str(), path.c_str(), e.what());
            std::exit(2);
        }
    }
    /// The --config file given, or "".
    std::string config_path() const {
        const CLI::Option* c = app_.get_config_ptr();
        return c && c->count() > 0 ? c->as<std::string>() : std::string();
    }

private:
    template <class V>
    struct element_of {
        using type = V;
    };
    template <class E, class A>
    struct element_of<std::vector<E, A>> {
        using type = E;
    };

    struct saved_option {
        std::string name, section;
        std::function<std::string()> value;  // "" when there is nothing a config can hold (NaN: "the default")
        const CLI::Option* option;           // given on the command line or in a config when count() > 0
    };

    /// A string as CLI11's config reader reads it back: quoted, with no escapes (it removes the
    /// quotes and keeps what is between them). "" when no quoting carries it: a '#' (a
    /// comment to the reader), a line break, both quote characters, or a final backslash.
    static std::string toml_value(const std::string& v) {
        if (v.find_first_of("#\n\r") != std::string::npos || (!v.empty() && v.back() == '\\')) return {};
        if (v.find('"') == std::string::npos) return "\"" + v + "\"";
        if (v.find('\'') == std::string::npos) return "'" + v + "'";
        return {};
    }
    static std::string toml_value(bool v) { return v ? "true" : "false"; }
    template <class N>
        requires std::is_arithmetic_v<N>
    static std::string toml_value(N v) {
        if constexpr (std::is_floating_point_v<N>) {
            if (!std::isfinite(v)) return {};
            char buf[64];
            const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact form
            std::string s(buf, r.ptr);
            // a whole number keeps a decimal point or exponent, so it reads back as a float
            if (s.find_first_of(".eE") == std::string::npos) s += ".0";
            return s;
        } else {
            return std::to_string(v);
        }
    }
    template <class E>
    static std::string toml_value(const std::vector<E>& v) {
        std::string out = "[";
        for (std::size_t i = 0; i < v.size(); ++i) {
            const std::string e = toml_value(static_cast<const E&>(v[i]));
            if (e.empty()) return {};
            out += (i ? ", " : "") + e;
        }
        return out + "]";
    }

    /// Rejects a value that is not a number, or reads as NaN or an infinity (checked before
    /// any range, whose message would otherwise misname the fault).
    static CLI::Validator finite() {
        return CLI::Validator(
            [](std::string& text) -> std::string {
                char* end = nullptr;
                const double v = std::strtod(text.c_str(), &end);
                if (end == text.c_str() || *end != '\0') return "Value " + text + " is not a number";
                if (std::isfinite(v)) return {};
                return "Value " + text + " is not a finite number";
            },
            "", "FINITE");
    }
    /// Rejects a number outside [lo, hi] ((lo, hi] when open_low), with the bounds written
    /// as the user would write them (CLI11's own checks print DBL_MAX in 309 digits).
    static CLI::Validator bounded(double lo, double hi, bool open_low) {
        const auto num = [](double v) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%g", v);
            return std::string(buf);
        };
        std::string need = std::isinf(hi) ? (open_low ? "> " : ">= ") + num(lo) : (open_low ? "in (" : "in [") + num(lo) + ", " + num(hi) + "]";
        return CLI::Validator(
            [lo, hi, open_low, need](std::string& text) -> std::string {
                const double v = std::strtod(text.c_str(), nullptr);  // (finite() and whole_number() ran first)
                if ((open_low ? v > lo : v >= lo) && v <= hi) return {};
                return "Value " + text + " is out of range: it must be " + need;
            },
            "", "RANGE");
    }
    /// Rejects a value that is not a whole number (e.g. 1.5 for a step count), and a negative
    /// one for an unsigned option (a seed of -1 would wrap to 18446744073709551615).
    static CLI::Validator whole_number(bool is_unsigned) {
        return CLI::Validator(
            [is_unsigned](std::string& text) -> std::string {
                if (is_unsigned && text.find('-') != std::string::npos) return "Value " + text + " is negative (a whole number >= 0 is needed)";
                long long v = 0;
                const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
                if (ec == std::errc() && end == text.data() + text.size()) return {};
                // unsigned values beyond long long (seeds) are left to the option's own conversion
                unsigned long long u = 0;
                const auto [uend, uec] = std::from_chars(text.data(), text.data() + text.size(), u);
                if (uec == std::errc() && uend == text.data() + text.size()) return {};
                return "Value " + text + " is not a whole number";
            },
            "", "INTEGER");
    }
    /// The checks every value of a V (or of each element of a std::vector<V>) gets: a number
    /// that is finite, or a whole number.
    template <class V>
    void check_kind() {
        using element = typename element_of<V>::type;
        if constexpr (std::is_floating_point_v<element>) last_->check(finite());
        else if constexpr (std::is_integral_v<element> && !std::is_same_v<element, bool>) last_->check(whole_number(std::is_unsigned_v<element>));
    }
    /// An option given twice takes its last value (as argparse, most tools, and a sweep that
    /// appends its overrides to a base command line expect); a list option (std::vector)
    /// collects the values of every occurrence.
    template <class V>
    void last_wins() {
        if constexpr (std::is_same_v<typename element_of<V>::type, V>) last_->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    cli& check(const CLI::Validator& v) {
        last_->check(v);
        return *this;
    }
    std::string program_;
    CLI::App app_;
    CLI::Option* last_ = nullptr;
    std::string section_;
    std::vector<saved_option> saved_;
    std::vector<std::string> sizes_;
};

}  // namespace examples
