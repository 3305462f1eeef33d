#pragma once
// Checkpoints: a model's parameters, and optionally the rest of a training run's state, in
// one safetensors file (see safetensors.hpp; writes are atomic).
//
// Layout of the file:
//   - every model parameter under its state_dict name ("encoder.0.q_proj.weight"), in the
//     model's element type: the file is a plain safetensors state dict that PyTorch
//     (safetensors.torch.load_file) reads as is;
//   - training state tensors (optimizer moments, ...) under `state_prefix` + their own name,
//     e.g. "__state__.optim.adam.m.encoder.0.q_proj.weight";
//   - metadata: strings. Exact integers (step counter, RNG seed and offset) are stored as
//     decimal strings, doubles in their shortest round-trip form (training_state helpers).
//
//   io::save_parameters(path, model, {{"config", "..."}});
//   io::load_parameters(path, model);                // strict: names and shapes must match
//
//   io::training_state<float> st;                      // what the optimizer and loop add
//   st.add_section("optim", opt.state_tensors(), opt.state_scalars());
//   st.set_u64("step", step);
//   st.set_generator("rng", gen);
//   io::save_checkpoint(dir + "/checkpoint.safetensors", model, st);
//   ...
//   io::training_state<float> back = io::load_checkpoint(path, model);
//   opt.load_state(back.section_tensors("optim"), back.section_metadata("optim"));
//   step = back.get_u64("step");
//   back.restore_generator("rng", gen);
//
// Loading copies into the existing parameter tensors in place (every Var handle stays
// valid) and only after the whole file has been checked and read: a failing load leaves
// the model as it was. Every floating-point tensor must be finite, both ways: loading a
// NaN throws io_error naming the file and the tensor; saving one throws numeric_error
// before anything is written, so a diverged run never replaces the last good checkpoint.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/tensor.hpp"
#include "depthlab/core/value_scan.hpp"
#include "depthlab/io/safetensors.hpp"
#include "depthlab/nn/module.hpp"

namespace depthlab::io {

/// Names of training state tensors in a checkpoint file start with this.
inline constexpr std::string_view state_prefix = "__state__.";

/// What load_parameters found besides the tensors it loaded (both empty after a strict load).
struct load_report {
    std::vector<std::string> missing;     ///< model parameters absent from the file (left as they were)
    std::vector<std::string> unexpected;  ///< tensors in the file that the model does not have (ignored)
};

namespace detail {
inline std::string join_names(const std::vector<std::string>& names, std::size_t max_shown = 20) {
    std::string s;
    for (std::size_t i = 0; i < names.size() && i < max_shown; ++i) s += (i ? ", " : "") + ("'" + names[i] + "'");
    if (names.size() > max_shown) s += depthlab::detail::cat(", ... (", names.size() - max_shown, " more)");
    return s;
}

/// How many values are non-finite, and the first: "3 non-finite values (the first is nan
/// at flat index 2 of 6)"; count 0 for integer tensors.
template <class T, class B>
std::pair<std::size_t, std::string> find_nonfinite(const Tensor<T, B>& t) {
    if constexpr (!std::is_floating_point_v<T>) {
        return {0, ""};
    } else {
        const value_scan<T> r = scan_values(t, [](T x) { return !std::isfinite(x); });
        return {r.count, depthlab::detail::cat(r.count, " non-finite value", r.count == 1 ? "" : "s", " (the first is ", r.value,
                                               " at flat index ", r.first, " of ", r.numel, ")")};
    }
}
/// io_error unless the tensor read from `path` is finite: a NaN in a file must be named at
/// load time, not surface steps later as a non-finite loss naming nothing.
template <class T, class B>
Tensor<T, B> require_finite(Tensor<T, B> t, const std::string& path, const std::string& name) {
    const auto [count, what] = find_nonfinite(t);
    DEPTHLAB_CHECK(count == 0, io_error, "checkpoint ", path, ": tensor '", name, "' holds ", what);
    return t;
}
/// numeric_error unless every tensor about to be saved is finite: a diverged run must
/// never replace the last good checkpoint with one it cannot be resumed from.
template <class T, class B>
void require_finite_for_save(const Tensor<T, B>& t, const std::string& path, const std::string& name) {
    const auto [count, what] = find_nonfinite(t);
    DEPTHLAB_CHECK(count == 0, numeric_error, "save ", path, ": tensor '", name, "' holds ", what,
                   "; nothing was written (the file keeps its previous content)");
}

/// Checks the file against the module, reads every parameter it has into temporaries, then
/// copies them in place. Tensors under state_prefix are never parameters (and never unexpected).
template <class T, class B>
load_report load_module(const safetensors_file& f, const nn::Module<T, B>& module, bool strict) {
    auto params = module.named_parameters();  // handles: writing through them updates the module
    load_report rep;
    std::map<std::string, bool> known;
    for (const auto& [name, p] : params) known[name] = true;
    for (const std::string& n : f.names())
        if (n.rfind(state_prefix, 0) != 0 && !known.count(n)) rep.unexpected.push_back(n);
    for (const auto& [name, p] : params)
        if (!f.contains(name)) rep.missing.push_back(name);
    if (strict && (!rep.missing.empty() || !rep.unexpected.empty())) {
        std::string msg = depthlab::detail::cat("checkpoint ", f.path(), ": does not match the model");
        if (!rep.missing.empty()) msg += depthlab::detail::cat("; missing ", rep.missing.size(), ": ", join_names(rep.missing));
        if (!rep.unexpected.empty())
            msg += depthlab::detail::cat("; unexpected ", rep.unexpected.size(), ": ", join_names(rep.unexpected));
        throw io_error(msg);
    }
    // Shapes and dtypes first (cheap, and before anything is read or written).
    for (const auto& [name, p] : params) {
        if (!f.contains(name)) continue;
        const tensor_entry& e = f.entry(name);
        DEPTHLAB_CHECK(e.shape == p.value().shape(), io_error, "checkpoint ", f.path(), ": tensor '", name, "' has shape ",
                       e.shape, ", model expects ", p.value().shape());
        DEPTHLAB_CHECK(e.dtype == "F32" || e.dtype == "F64", io_error, "checkpoint ", f.path(), ": tensor '", name, "' is ",
                       e.dtype, ", model parameters are ", dtype_of<T>::name);
    }
    std::vector<std::pair<Tensor<T, B>*, Tensor<T, B>>> staged;
    for (auto& [name, p] : params)
        if (f.contains(name)) staged.emplace_back(&p.value(), require_finite(f.template load<T, B>(name), f.path(), name));
    for (auto& [dst, src] : staged) dst->copy_(src);
    return rep;
}
}  // namespace detail

/// Writes every parameter of `module` under its state_dict name, plus metadata (atomic).
template <class T, class B>
void save_parameters(const std::string& path, const nn::Module<T, B>& module, const metadata_map& metadata = {}) {
    safetensors_writer w;
    for (const auto& [name, p] : module.named_parameters()) {
        detail::require_finite_for_save(p.value(), path, name);
        w.add(name, p.value());
    }
    w.set_metadata(metadata);
    w.write(path);
}
/// save_parameters(path, model, {{"key", "value"}}): a braced list is metadata, never a
/// name_map (io/name_map.hpp's overload would otherwise make the call ambiguous).
template <class T, class B>
void save_parameters(const std::string& path, const nn::Module<T, B>& module,
                     std::initializer_list<metadata_map::value_type> metadata) {
    save_parameters(path, module, metadata_map(metadata));
}

/// Loads parameters saved by save_parameters (or save_checkpoint, or PyTorch's
/// safetensors.torch.save_file of a state dict) into `module`, in place.
/// strict: every parameter must be in the file and the file must hold nothing else (training
/// state tensors excepted); otherwise missing ones are left as they are and unexpected ones
/// ignored (both listed in the report). Shapes must match either way; F32 and F64 tensors
/// convert to the model's type. Throws io_error naming the file and the tensors at fault.
template <class T, class B>
load_report load_parameters(const std::string& path, nn::Module<T, B>& module, bool strict = true) {
    const safetensors_file f(path);
    return detail::load_module(f, module, strict);
}

/// Everything a resumable run needs besides the parameters: named tensors (optimizer
/// moments, ...; any names, stored under state_prefix) and string metadata (step counter,
/// RNG state, hyper-parameters, config). The helpers store numbers exactly.
template <class T, class B = backend::cpu>
struct training_state {
    std::vector<std::pair<std::string, Tensor<T, B>>> tensors;
    metadata_map metadata;

    [[nodiscard]] bool has_tensor(const std::string& name) const {
        for (const auto& [n, t] : tensors)
            if (n == name) return true;
        return false;
    }
    /// The tensor called `name`; throws io_error listing what there is.
    [[nodiscard]] const Tensor<T, B>& tensor(const std::string& name) const {
        std::vector<std::string> have;
        for (const auto& [n, t] : tensors) {
            if (n == name) return t;
            have.push_back(n);
        }
        throw io_error(depthlab::detail::cat("training_state: no tensor '", name, "' (has ", have.size(), ": ",
                                             detail::join_names(have), ")"));
    }
    /// The metadata string under `key`; throws io_error if absent.
    [[nodiscard]] const std::string& get(const std::string& key) const {
        const auto it = metadata.find(key);
        DEPTHLAB_CHECK(it != metadata.end(), io_error, "training_state: no metadata '", key, "'");
        return it->second;
    }

    /// Adds an exported sub-state under "<section>.": its tensors as "<section>.<name>" and
    /// its scalars as metadata "<section>.<key>". For an optimizer:
    ///     st.add_section("optim", opt.state_tensors(), opt.state_scalars());
    ///     opt.load_state(back.section_tensors("optim"), back.section_metadata("optim"));
    /// Throws usage_error if a name is already taken.
    void add_section(const std::string& section, const std::vector<std::pair<std::string, Tensor<T, B>>>& ts,
                     const metadata_map& scalars = {}) {
        const std::string pre = section + ".";
        for (const auto& [n, t] : ts) {
            DEPTHLAB_CHECK(!has_tensor(pre + n), usage_error, "training_state: tensor '", pre + n, "' added twice");
            tensors.emplace_back(pre + n, t);
        }
        for (const auto& [k, v] : scalars)
            DEPTHLAB_CHECK(metadata.emplace(pre + k, v).second, usage_error, "training_state: metadata '", pre + k, "' added twice");
    }
    /// The tensors of a section, without the "<section>." prefix (in file order).
    [[nodiscard]] std::vector<std::pair<std::string, Tensor<T, B>>> section_tensors(const std::string& section) const {
        const std::string pre = section + ".";
        std::vector<std::pair<std::string, Tensor<T, B>>> out;
        for (const auto& [n, t] : tensors)
            if (n.rfind(pre, 0) == 0) out.emplace_back(n.substr(pre.size()), t);
        return out;
    }
    /// The metadata of a section, without the "<section>." prefix.
    [[nodiscard]] metadata_map section_metadata(const std::string& section) const {
        const std::string pre = section + ".";
        metadata_map out;
        for (const auto& [k, v] : metadata)
            if (k.rfind(pre, 0) == 0) out.emplace(k.substr(pre.size()), v);
        return out;
    }

    void set_u64(const std::string& key, std::uint64_t v) { metadata[key] = std::to_string(v); }
    /// Parses a decimal u64 exactly (no sign, no spaces, no overflow), else io_error.
    [[nodiscard]] std::uint64_t get_u64(const std::string& key) const {
        const std::string& s = get(key);
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        DEPTHLAB_CHECK(!s.empty() && ec == std::errc() && end == s.data() + s.size(), io_error, "training_state: metadata '",
                       key, "' = '", s, "' is not an unsigned 64-bit integer");
        return v;
    }
    /// Shortest decimal form that reads back to the same double (inf/nan included).
    void set_double(const std::string& key, double v) {
        char buf[64];
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
        metadata[key] = std::string(buf, end);
        (void)ec;
    }
    [[nodiscard]] double get_double(const std::string& key) const {
        const std::string& s = get(key);
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        DEPTHLAB_CHECK(!s.empty() && ec == std::errc() && end == s.data() + s.size(), io_error, "training_state: metadata '",
                       key, "' = '", s, "' is not a number");
        return v;
    }
    /// A Generator's whole state: "<key>.seed" and "<key>.offset" (decimal u64).
    void set_generator(const std::string& key, const Generator& g) {
        set_u64(key + ".seed", g.seed());
        set_u64(key + ".offset", g.offset());
    }
    void restore_generator(const std::string& key, Generator& g) const { g.set_state(get_u64(key + ".seed"), get_u64(key + ".offset")); }
};

/// Writes the parameters of `module` and a training state in one file (atomic). State
/// tensor names get state_prefix; the state's metadata becomes the file's metadata.
template <class T, class B>
void save_checkpoint(const std::string& path, const nn::Module<T, B>& module, const training_state<T, B>& state) {
    safetensors_writer w;
    for (const auto& [name, p] : module.named_parameters()) {
        DEPTHLAB_CHECK(name.rfind(state_prefix, 0) != 0, usage_error, "save_checkpoint ", path, ": parameter name '", name,
                       "' starts with the reserved prefix '", state_prefix, "'");
        detail::require_finite_for_save(p.value(), path, name);
        w.add(name, p.value());
    }
    for (const auto& [name, t] : state.tensors) {
        detail::require_finite_for_save(t, path, std::string(state_prefix) + name);
        w.add(std::string(state_prefix) + name, t);
    }
    w.set_metadata(state.metadata);
    w.write(path);
}

/// Loads a checkpoint written by save_checkpoint: the parameters into `module` (in place,
/// strict as in load_parameters), and returns the training state (tensors without the
/// prefix, converted to T if stored as the other float type; all metadata). The module is
/// only modified once every tensor has been checked and read.
template <class T, class B>
training_state<T, B> load_checkpoint(const std::string& path, nn::Module<T, B>& module, bool strict = true) {
    const safetensors_file f(path);
    training_state<T, B> st;
    for (const std::string& n : f.names())  // read the state first: a failure leaves the module untouched
        if (n.rfind(state_prefix, 0) == 0)
            st.tensors.emplace_back(n.substr(state_prefix.size()), detail::require_finite(f.template load<T, B>(n), path, n));
    st.metadata = f.metadata();
    detail::load_module(f, module, strict);
    return st;
}

}  // namespace depthlab::io
