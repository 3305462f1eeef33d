#pragma once
// Interop with PyTorch / Hugging Face checkpoints: a name_map says where each depthlab
// parameter lives in an external state dict (a renaming, plus the few transforms the layouts
// need), load_parameters(path, model, map) imports a safetensors state dict through it and
// save_parameters(path, model, map) exports one (atomic, metadata {"format": "pt"}).
//
// A map entry is one of: `tensor` (one external tensor, same shape: PyTorch's Linear weight
// is (out, in) like depthlab's), `transposed` (one external matrix holding the parameter's
// transpose: GPT-2's Conv1D weight is (in, out)), `split` (the parameter is
// several external tensors concatenated along dim 0: depthlab's fused in_proj_weight (3D, D)
// = HF's query/key/value weights (D, D) each), `fixed` (the layout has no such tensor and
// computes as if the parameter had a fixed value: loading sets it, saving checks it), `kept`
// (the layout has no counterpart: loading leaves it unchanged, saving leaves it out; both
// say so in their report). An entry may list `tied` external names holding the same values
// (HF's decoder weight = word embeddings): optional on load but then equal (the first one
// present is read when the main name is absent), written on save unless write_tied = false.
// External names may also be `ignored` (buffers such as position_ids) or `rejected`
// (tensors the depthlab model cannot represent: loading fails when they are present).
// Every name is used once: a second use throws usage_error at once, naming both uses, and
// leaves the map as it was. A plain renaming for any other layout:
//     io::name_map m("my layout", {{"encoder.0.feed_forward.linear1.weight", "blocks.0.mlp.fc1.weight"}, ...});
// (argument order as io::load_parameters(path, model) in checkpoint.hpp, whose strict
// identity-named load this generalises).
//
// load_parameters checks everything before it writes anything: every model parameter has an
// entry and every entry a parameter (usage_error otherwise); every external tensor is there,
// F32/F64, finite and of the right shape; tied copies are equal; no file tensor is left
// unused unless ignored or `allow_extra` (io_error naming the file, the layout, the external
// and depthlab names and both shapes, every problem at once). A failed load leaves the model
// unchanged.
//
// The maps of the Hugging Face and torch.nn.Transformer layouts are in io/layouts.hpp.
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/io/checkpoint.hpp"
#include "depthlab/nn/module.hpp"

namespace depthlab::io {

enum class map_kind { tensor, split, fixed, kept, transposed };
enum class fixed_value { identity, zeros };

struct name_map_entry {
    std::string internal;               ///< the depthlab parameter name
    map_kind kind = map_kind::tensor;
    std::vector<std::string> external;  ///< tensor, transposed: one name; split: the parts along dim 0, in order
    std::vector<std::string> tied;      ///< more external names with the same values (tensor entries)
    fixed_value value = fixed_value::zeros;
    std::string note;                   ///< why (fixed, kept)
};

class name_map {
public:
    explicit name_map(std::string layout) : layout_(std::move(layout)) {}
    /// A plain renaming: {depthlab name, external name} pairs.
    name_map(std::string layout, const std::vector<std::pair<std::string, std::string>>& pairs) : layout_(std::move(layout)) {
        for (const auto& pr : pairs) add(pr.first, pr.second);
    }
    [[nodiscard]] const std::string& layout() const { return layout_; }
    [[nodiscard]] const std::vector<name_map_entry>& entries() const { return entries_; }
    [[nodiscard]] const name_map_entry* find(const std::string& internal) const {
        const auto it = by_internal_.find(internal);
        return it == by_internal_.end() ? nullptr : &entries_[it->second];
    }
    /// Why an external name is ignored / rejected (nullptr: it is not).
    [[nodiscard]] const std::string* ignored(const std::string& external) const { return lookup(ignored_, external); }
    [[nodiscard]] const std::string* rejected(const std::string& external) const { return lookup(rejected_, external); }
    /// Whether an external name belongs to an entry (tensor, part or tied copy).
    [[nodiscard]] bool used(const std::string& external) const { return uses_.count(external) && !ignored_.count(external) && !rejected_.count(external); }

    name_map& add(std::string internal, std::string external) { return push({std::move(internal), map_kind::tensor, {std::move(external)}, {}, {}, {}}); }
    /// A matrix stored as its transpose in the layout.
    name_map& transposed(std::string internal, std::string external) {
        return push({std::move(internal), map_kind::transposed, {std::move(external)}, {}, {}, {}});
    }
    name_map& split(std::string internal, std::vector<std::string> parts) {
        DEPTHLAB_CHECK(parts.size() >= 2, usage_error, "name_map ", layout_, ": split of '", internal, "' needs at least 2 parts");
        return push({std::move(internal), map_kind::split, std::move(parts), {}, {}, {}});
    }
    name_map& fixed(std::string internal, fixed_value v, std::string note) {
        return push({std::move(internal), map_kind::fixed, {}, {}, v, std::move(note)});
    }
    name_map& keep(std::string internal, std::string note) { return push({std::move(internal), map_kind::kept, {}, {}, {}, std::move(note)}); }
    /// Another external name holding the values of `internal` (a tensor entry already added).
    name_map& tie(const std::string& internal, std::string external) {
        const auto it = by_internal_.find(internal);
        DEPTHLAB_CHECK(it != by_internal_.end() && entries_[it->second].kind == map_kind::tensor, usage_error, "name_map ", layout_,
                       ": tie '", external, "' to '", internal, "', which is not a tensor entry");
        claim(external, "a tied copy of '" + internal + "'");
        entries_[it->second].tied.push_back(std::move(external));
        return *this;
    }
    name_map& ignore(std::string external, std::string note) {
        claim(external, "ignored");
        ignored_[std::move(external)] = std::move(note);
        return *this;
    }
    name_map& reject(std::string external, std::string note) {
        claim(external, "rejected");
        rejected_[std::move(external)] = std::move(note);
        return *this;
    }

private:
    static const std::string* lookup(const std::map<std::string, std::string>& m, const std::string& k) {
        const auto it = m.find(k);
        return it == m.end() ? nullptr : &it->second;
    }
    // A refused name leaves the map as it was.
    void claim(const std::string& external, const std::string& use) {
        const auto it = uses_.find(external);
        DEPTHLAB_CHECK(it == uses_.end(), usage_error, "name_map ", layout_, ": external name '", external, "' is used twice: ", it->second, " and ", use);
        uses_.emplace(external, use);
    }
    name_map& push(name_map_entry e) {
        DEPTHLAB_CHECK(!by_internal_.count(e.internal), usage_error, "name_map ", layout_, ": depthlab parameter '", e.internal, "' is mapped twice");
        std::vector<std::string> uses;
        for (std::size_t k = 0; k < e.external.size(); ++k) {
            uses.push_back(e.kind == map_kind::split ? depthlab::detail::cat("part ", k + 1, " of '", e.internal, "'") : "'" + e.internal + "'");
            const auto it = uses_.find(e.external[k]);
            DEPTHLAB_CHECK(it == uses_.end(), usage_error, "name_map ", layout_, ": external name '", e.external[k], "' is used twice: ", it->second,
                           " and ", uses.back());
            for (std::size_t j = 0; j < k; ++j)
                DEPTHLAB_CHECK(e.external[j] != e.external[k], usage_error, "name_map ", layout_, ": external name '", e.external[k],
                               "' is used twice: ", uses[j], " and ", uses.back());
        }
        for (std::size_t k = 0; k < e.external.size(); ++k) uses_.emplace(e.external[k], uses[k]);
        by_internal_[e.internal] = entries_.size();
        entries_.push_back(std::move(e));
        return *this;
    }
    std::string layout_;
    std::vector<name_map_entry> entries_;
    std::map<std::string, std::size_t> by_internal_;
    std::map<std::string, std::string> uses_, ignored_, rejected_;
};

/// What a load or save did besides the tensors it moved.
struct interop_report {
    std::vector<std::string> kept;     ///< depthlab parameters the layout lacks (unchanged / not written)
    std::vector<std::string> fixed;    ///< depthlab parameters set to (load) or checked at (save) a fixed value
    std::vector<std::string> ignored;  ///< file tensors not read (ignored buffers; extras under allow_extra)
};
struct interop_load_options {
    bool allow_extra = false;  ///< file tensors the map does not know are ignored (listed) instead of an error
};
struct interop_save_options {
    bool write_tied = true;  ///< tied copies written too, as PyTorch's state_dict() holds them
};

namespace detail {
/// The model's parameters with their entries; usage_error when map and model do not fit.
template <class T, class B>
std::vector<std::pair<const name_map_entry*, Var<T, B>>> resolve_entries(const nn::Module<T, B>& module, const name_map& map, const std::string& where) {
    std::vector<std::pair<const name_map_entry*, Var<T, B>>> out;
    std::vector<std::string> unmapped, unknown;
    std::map<std::string, bool> have;
    for (const auto& [name, p] : module.named_parameters()) {
        have[name] = true;
        if (const name_map_entry* e = map.find(name)) out.emplace_back(e, p);
        else unmapped.push_back(name);
    }
    for (const name_map_entry& e : map.entries())
        if (!have.count(e.internal)) unknown.push_back(e.internal);
    if (unmapped.empty() && unknown.empty()) return out;
    std::string msg = where + ": the name map does not fit the model";
    if (!unmapped.empty()) msg += depthlab::detail::cat("; no entry for ", unmapped.size(), " model parameter(s): ", join_names(unmapped));
    if (!unknown.empty()) msg += depthlab::detail::cat("; entries for ", unknown.size(), " parameter(s) the model does not have: ", join_names(unknown));
    throw usage_error(msg);
}
template <class T>
std::vector<T> fixed_values(fixed_value v, const Shape& s, const std::string& where, const std::string& name) {
    std::vector<T> out(static_cast<std::size_t>(s.numel()), T(0));
    if (v == fixed_value::identity) {
        DEPTHLAB_CHECK(s.rank() == 2 && s[0] == s[1], usage_error, where, ": '", name, "' has shape ", s, ", not a square matrix (identity)");
        for (index_t i = 0; i < s[0]; ++i) out[static_cast<std::size_t>(i * s[0] + i)] = T(1);
    }
    return out;
}
inline Shape part_shape(const Shape& s, std::size_t parts) {
    Shape p = s;
    p[0] = s[0] / static_cast<index_t>(parts);
    return p;
}
}  // namespace detail

/// Loads an external safetensors state dict into `module` through `map` (see the top).
template <class T, class B>
interop_report load_parameters(const std::string& path, nn::Module<T, B>& module, const name_map& map, interop_load_options opt = {}) {
    using depthlab::detail::cat;
    const safetensors_file f(path);
    const std::string where = cat("load_parameters ", path, " (layout ", map.layout(), ")");
    const auto params = detail::resolve_entries(module, map, where);
    interop_report rep;
    std::vector<std::string> problems;
    // a tensor entry reads its external name, or else the first tied copy the file has
    const auto source = [&](const name_map_entry& e) -> const std::string& {
        if (!f.contains(e.external[0]))
            for (const std::string& t : e.tied)
                if (f.contains(t)) return t;
        return e.external[0];
    };
    const auto check = [&](const std::string& ext, const std::string& role, const Shape& want) {
        if (!f.contains(ext)) {
            problems.push_back(cat("no tensor '", ext, "' ", want, " for ", role));
            return;
        }
        const tensor_entry& e = f.entry(ext);
        if (e.shape != want) problems.push_back(cat("tensor '", ext, "' for ", role, " has shape ", e.shape, ", expected ", want));
        else if (e.dtype != "F32" && e.dtype != "F64") problems.push_back(cat("tensor '", ext, "' for ", role, " is ", e.dtype, ", not F32 or F64"));
    };
    for (const auto& [e, p] : params) {
        const Shape& s = p.value().shape();
        const std::string role = cat("depthlab '", e->internal, "' ", s);
        if (e->kind == map_kind::tensor) {
            const std::string& src = source(*e);
            check(src, role, s);
            for (const std::string& t : e->tied)
                if (t != src && f.contains(t)) check(t, cat(role, " (tied to '", src, "')"), s);
        } else if (e->kind == map_kind::split) {
            const std::size_t k = e->external.size();
            if (s.rank() == 0 || s[0] % static_cast<index_t>(k) != 0) {
                problems.push_back(cat(role, " cannot be split into ", k, " equal parts along dim 0"));
                continue;
            }
            for (std::size_t i = 0; i < k; ++i) check(e->external[i], cat("part ", i + 1, " of ", k, " of ", role), detail::part_shape(s, k));
        } else if (e->kind == map_kind::transposed) {
            if (s.rank() != 2) problems.push_back(cat(role, " is not a matrix, so it cannot be stored transposed"));
            else check(e->external[0], cat(role, " (stored transposed)"), Shape{s[1], s[0]});
        }
    }
    std::vector<std::string> extra;
    for (const std::string& n : f.names()) {
        if (map.used(n)) continue;
        if (map.ignored(n)) rep.ignored.push_back(n);
        else if (const std::string* why = map.rejected(n)) problems.push_back(cat("tensor '", n, "' cannot be loaded: ", *why));
        else extra.push_back(n);
    }
    if (!extra.empty() && !opt.allow_extra)
        problems.push_back(cat(extra.size(), " tensor(s) the map does not know (allow_extra ignores them): ", detail::join_names(extra)));
    rep.ignored.insert(rep.ignored.end(), extra.begin(), extra.end());
    if (!problems.empty()) {
        std::string msg = where + ": ";
        for (std::size_t i = 0; i < problems.size() && i < 20; ++i) msg += (i ? "; " : "") + problems[i];
        if (problems.size() > 20) msg += cat("; ... (", problems.size() - 20, " more problems)");
        throw io_error(msg);
    }
    // Read and stage every value, then write them all.
    std::vector<std::pair<Tensor<T, B>*, Tensor<T, B>>> staged;
    for (const auto& [e, p] : params) {
        const Shape& s = p.value().shape();
        if (e->kind == map_kind::kept) {
            rep.kept.push_back(e->internal);
        } else if (e->kind == map_kind::fixed) {
            staged.emplace_back(&p.value(), Tensor<T, B>::from(s, detail::fixed_values<T>(e->value, s, where, e->internal)));
            rep.fixed.push_back(e->internal);
        } else if (e->kind == map_kind::tensor) {
            const std::string& src = source(*e);
            Tensor<T, B> v = detail::require_finite(f.template load<T, B>(src), path, src);
            const std::vector<T> host = e->tied.empty() ? std::vector<T>{} : v.to_vector();
            for (const std::string& t : e->tied) {
                if (t == src || !f.contains(t)) continue;
                const std::vector<T> other = f.template load<T, B>(t).to_vector();
                std::size_t i = 0;
                while (i < host.size() && host[i] == other[i]) ++i;
                DEPTHLAB_CHECK(i == host.size(), io_error, where, ": tensor '", t, "' differs from '", src, "' at flat index ", i, " (",
                               other[i], " vs ", host[i], "), but depthlab ties both to '", e->internal, "'");
            }
            staged.emplace_back(&p.value(), std::move(v));
        } else if (e->kind == map_kind::transposed) {
            const std::string& src = e->external[0];
            staged.emplace_back(&p.value(), detail::require_finite(f.template load<T, B>(src), path, src).transpose(0, 1).contiguous());
        } else {
            Tensor<T, B> v = Tensor<T, B>::empty(s);
            const index_t n = s[0] / static_cast<index_t>(e->external.size());
            for (std::size_t i = 0; i < e->external.size(); ++i)
                v.slice(0, static_cast<index_t>(i) * n, static_cast<index_t>(i + 1) * n)
                    .copy_(detail::require_finite(f.template load<T, B>(e->external[i]), path, e->external[i]));
            staged.emplace_back(&p.value(), std::move(v));
        }
    }
    for (auto& [dst, src] : staged) dst->copy_(src);
    return rep;
}

/// Exports `module` through `map` as a safetensors state dict (atomic; nothing is written
/// if a check fails). Metadata: {"format": "pt"} (transformers' loader wants it) plus `metadata`.
template <class T, class B>
interop_report save_parameters(const std::string& path, const nn::Module<T, B>& module, const name_map& map, const metadata_map& metadata = {},
                               interop_save_options opt = {}) {
    using depthlab::detail::cat;
    const std::string where = cat("save_parameters ", path, " (layout ", map.layout(), ")");
    const auto params = detail::resolve_entries(module, map, where);
    interop_report rep;
    safetensors_writer w;
    std::vector<std::pair<std::string, Tensor<T, B>>> tied;
    for (const auto& [e, p] : params) {
        const Tensor<T, B>& v = p.value();
        if (e->kind == map_kind::kept) {
            rep.kept.push_back(e->internal);
            continue;
        }
        detail::require_finite_for_save(v, path, e->internal);
        if (e->kind == map_kind::fixed) {
            DEPTHLAB_CHECK(v.to_vector() == detail::fixed_values<T>(e->value, v.shape(), where, e->internal), usage_error, where, ": '",
                           e->internal, "' must be ", e->value == fixed_value::identity ? "the identity" : "zero", " in this layout (",
                           e->note, "); nothing was written");
            rep.fixed.push_back(e->internal);
        } else if (e->kind == map_kind::tensor) {
            w.add(e->external[0], v);
            if (opt.write_tied)
                for (const std::string& t : e->tied) tied.emplace_back(t, v);
        } else if (e->kind == map_kind::transposed) {
            DEPTHLAB_CHECK(v.rank() == 2, shape_error, where, ": '", e->internal, "' of shape ", v.shape(),
                           " is not a matrix, so it cannot be stored transposed; nothing was written");
            w.add(e->external[0], v.transpose(0, 1));  // (written contiguous)
        } else {
            const index_t n = v.shape()[0] / static_cast<index_t>(e->external.size());
            DEPTHLAB_CHECK(v.rank() >= 1 && n * static_cast<index_t>(e->external.size()) == v.shape()[0], shape_error, where, ": '", e->internal,
                           "' of shape ", v.shape(), " does not split into ", e->external.size(), " equal parts; nothing was written");
            for (std::size_t i = 0; i < e->external.size(); ++i)
                w.add(e->external[i], v.slice(0, static_cast<index_t>(i) * n, static_cast<index_t>(i + 1) * n));
        }
    }
    for (const auto& [name, v] : tied) w.add(name, v);
    metadata_map meta = metadata;
    meta.emplace("format", "pt");
    w.set_metadata(meta);
    w.write(path);
    return rep;
}

}  // namespace depthlab::io
