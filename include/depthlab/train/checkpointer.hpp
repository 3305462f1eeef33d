#pragma once
// The state of a resumable run, owned in one place: the parameters, the optimiser's state
// ("optim.*"), the step counter ("step"), every tracked random generator ("rng.<name>.seed",
// "rng.<name>.offset"), every tracked stream position ("<name>.<key>": a data sampler's
// epoch and offset), tracked tensor sections ("<section>.*": θ⁰ for rewinding) and free
// metadata (the model config, the recipe). A training loop, a resume and an analysis that
// loads the run all go through this, so the keys cannot drift apart between programs.
//
//     train::checkpointer<float, B> ckpt(out + "/checkpoint.safetensors");
//     ckpt.track("data", data_rng);                        // rng.data.*
//     ckpt.track("data", stream);                          // data.*: stream.state() by field name
//     ckpt.track("sampler", [&] { return sampler_state(); }, [&](const io::metadata_map& m) { ... });
//     io::save_config(ckpt.metadata(), "config.", cfg);
//     ckpt.save(model, &opt, step);   ...   const std::int64_t step = ckpt.load(model, &opt);
//
// In a data-parallel run (set_communicator with several ranks) save() is collective: rank 0
// writes the file, holding every rank's tracked generators (rank r's as
// "rng.<name>.rank<r>.*": each rank draws its own dropout masks), and load() gives each rank
// its own (rank 0's where the file has none for it, e.g. a single-process checkpoint).
// Parameters, optimiser state and stream positions are the same on every rank.
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/dist/communicator.hpp"
#include "depthlab/io/checkpoint.hpp"
#include "depthlab/io/config.hpp"
#include "depthlab/nn/module.hpp"
#include "depthlab/optim/optimizer.hpp"

namespace depthlab::train {

/// The unsigned integer under `key` of a tracked stream's state; io_error naming the key
/// when it is absent or not a decimal u64 (a corrupt or foreign checkpoint).
inline std::uint64_t state_u64(const io::metadata_map& m, const std::string& key) {
    io::training_state<float> st;
    const auto it = m.find(key);
    DEPTHLAB_CHECK(it != m.end(), io_error, "checkpoint: the stream state has no '", key, "'");
    st.metadata[key] = it->second;
    return st.get_u64(key);
}

template <class T, class B = backend::cpu>
class checkpointer {
public:
    using tensor_list = std::vector<std::pair<std::string, Tensor<T, B>>>;

    explicit checkpointer(std::string path) : path_(std::move(path)) {}

    [[nodiscard]] const std::string& path() const { return path_; }
    /// The ranks of a data-parallel run (null: this process alone). Not owned.
    void set_communicator(dist::communicator* comm) { comm_ = comm; }
    /// Saved as is with every checkpoint and read back by load() (configs, the recipe).
    [[nodiscard]] io::metadata_map& metadata() { return metadata_; }
    [[nodiscard]] const io::metadata_map& metadata() const { return metadata_; }

    /// A random generator, saved as "rng.<name>.{seed,offset}".
    void track(const std::string& name, Generator& g) {
        claim("rng." + name);
        generators_.emplace_back(name, &g);
    }
    /// A position in a stream (its state as string pairs), saved as "<name>.<key>".
    void track(const std::string& name, std::function<io::metadata_map()> save, std::function<void(const io::metadata_map&)> restore) {
        claim(name);
        streams_.push_back({name, std::move(save), std::move(restore)});
    }
    /// A data stream with state() / set_state() whose state type lists its fields with
    /// config_fields (data::translation_stream, data::albert_sampler): "<name>.<field>".
    template <class Stream>
        requires requires(Stream& s) {
            s.set_state(s.state());
            io::save_config(std::declval<io::metadata_map&>(), "", s.state());
        }
    void track(const std::string& name, Stream& s) {
        using state_type = std::remove_cvref_t<decltype(s.state())>;
        track(name, [&s] {
            io::metadata_map m;
            io::save_config(m, "", s.state());
            return m;
        }, [&s, name](const io::metadata_map& m) {
            state_type st;
            try {
                io::load_config(m, "", st);
            } catch (const io_error& e) {
                throw io_error(depthlab::detail::cat("checkpoint: the state of stream '", name, "' (", name, ".*): ", e.what()));
            }
            s.set_state(st);
        });
    }
    /// Extra tensors (e.g. θ⁰), saved as the state section "<section>".
    void track_tensors(const std::string& section, std::function<tensor_list()> save, std::function<void(const tensor_list&)> restore) {
        claim(section);
        sections_.push_back({section, std::move(save), std::move(restore)});
    }

    /// Writes the checkpoint atomically. A non-finite parameter or state tensor is refused
    /// (numeric_error naming the step and the tensor) and the file on disk, the last good
    /// checkpoint, is left as it was.
    void save(const nn::Module<T, B>& model, const optim::Optimizer<T, B>* opt, std::int64_t step) const;
    /// Reads `path` (default: this checkpointer's) into the model, the optimiser (if given),
    /// every tracked generator, stream and section, and metadata(); returns the step. Throws
    /// io_error naming the file and the first missing or bad key. The parameters are checked
    /// in full before the model changes, and so is the optimiser state before the optimiser
    /// changes; a failure after the parameters loaded (a bad optimiser state, a missing
    /// stream) leaves the model loaded: treat the objects as unusable and stop.
    std::int64_t load(nn::Module<T, B>& model, optim::Optimizer<T, B>* opt, const std::string& path = {});

private:
    static std::string rank_key(const std::string& name, int rank) { return "rng." + name + ".rank" + std::to_string(rank); }
    /// (seed, offset) of every tracked generator of every rank, rank-major (collective).
    [[nodiscard]] std::vector<std::uint64_t> gather_generators() const {
        if (!comm_ || !comm_->distributed() || generators_.empty()) return {};
        std::vector<std::int64_t> mine;
        for (const auto& [name, g] : generators_) {
            mine.push_back(static_cast<std::int64_t>(g->seed()));
            mine.push_back(static_cast<std::int64_t>(g->offset()));
        }
        std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(comm_->size()));
        comm_->host_side().all_gather(mine.data(), mine.size(), all.data());
        return {all.begin(), all.end()};
    }
    [[nodiscard]] bool owned(const std::string& key) const {
        if (key == "step" || key.rfind("optim.", 0) == 0 || key.rfind("rng.", 0) == 0) return true;
        for (const auto& s : streams_)
            if (key.rfind(s.name + ".", 0) == 0) return true;
        return false;
    }
    void claim(const std::string& name) {
        DEPTHLAB_CHECK(!name.empty() && name != "step" && name != "optim" && name != "rng", usage_error, "checkpointer: '", name,
                       "' is reserved or empty");
        for (const auto& n : claimed_) DEPTHLAB_CHECK(n != name, usage_error, "checkpointer: '", name, "' is tracked twice");
        claimed_.push_back(name);
    }
    struct stream {
        std::string name;
        std::function<io::metadata_map()> save;
        std::function<void(const io::metadata_map&)> restore;
    };
    struct section {
        std::string name;
        std::function<tensor_list()> save;
        std::function<void(const tensor_list&)> restore;
    };
    std::string path_;
    dist::communicator* comm_ = nullptr;
    io::metadata_map metadata_;
    std::vector<std::pair<std::string, Generator*>> generators_;
    std::vector<stream> streams_;
    std::vector<section> sections_;
    std::vector<std::string> claimed_;
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B>
void checkpointer<T, B>::save(const nn::Module<T, B>& model, const optim::Optimizer<T, B>* opt, std::int64_t step) const {
    DEPTHLAB_CHECK(step >= 0, usage_error, "checkpointer::save: step ", step, " < 0");
    const std::vector<std::uint64_t> ranks_rng = gather_generators();
    if (comm_ && !comm_->is_root()) return;
    io::training_state<T, B> st;
    st.metadata = metadata_;
    if (opt) st.add_section("optim", opt->state_tensors(), opt->state_scalars());
    for (const auto& s : sections_) st.add_section(s.name, s.save());
    st.set_u64("step", static_cast<std::uint64_t>(step));
    for (const auto& [name, g] : generators_) st.set_generator("rng." + name, *g);
    for (int r = 1; comm_ && r < comm_->size(); ++r)
        for (std::size_t i = 0; i < generators_.size(); ++i) {
            const std::string key = rank_key(generators_[i].first, r);
            const std::size_t at = 2 * (static_cast<std::size_t>(r) * generators_.size() + i);
            st.set_u64(key + ".seed", ranks_rng[at]);
            st.set_u64(key + ".offset", ranks_rng[at + 1]);
        }
    for (const auto& s : streams_)
        for (const auto& [k, v] : s.save()) st.metadata[s.name + "." + k] = v;
    try {
        io::save_checkpoint(path_, model, st);
    } catch (const numeric_error& e) {  // (a non-finite tensor: which step's checkpoint was refused)
        throw numeric_error(depthlab::detail::cat("checkpoint of step ", step, ": ", e.what()));
    }
}

template <class T, class B>
std::int64_t checkpointer<T, B>::load(nn::Module<T, B>& model, optim::Optimizer<T, B>* opt, const std::string& path) {
    const std::string& from = path.empty() ? path_ : path;
    const io::training_state<T, B> st = io::load_checkpoint(from, model);
    DEPTHLAB_CHECK(!opt || !st.section_metadata("optim").empty(), io_error, from,
                   " is not a training checkpoint: it holds parameters but no optimiser state (a file of save_parameters or "
                   "save_pretrained?); a resume needs the checkpoint.safetensors a training run wrote");
    if (opt) opt->load_state(st.section_tensors("optim"), st.section_metadata("optim"), from);
    for (const auto& s : sections_) {
        const auto ts = st.section_tensors(s.name);
        DEPTHLAB_CHECK(!ts.empty(), io_error, from, ": no tensors of section '", s.name, "'");
        s.restore(ts);
    }
    const int rank = comm_ ? comm_->rank() : 0;
    for (const auto& [name, g] : generators_) {
        const std::string own = rank_key(name, rank);
        if (rank > 0 && st.metadata.count(own + ".seed")) {
            st.restore_generator(own, *g);
        } else {
            st.restore_generator("rng." + name, *g);
            if (rank > 0) dist::own_stream_per_rank(*g, *comm_);  // (a file from fewer ranks: a stream of its own all the same)
        }
    }
    for (const auto& s : streams_) {
        const io::metadata_map m = st.section_metadata(s.name);
        DEPTHLAB_CHECK(!m.empty(), io_error, from, ": no metadata '", s.name, ".*' (the stream's position)");
        try {
            s.restore(m);
        } catch (const io_error& e) {
            throw io_error(depthlab::detail::cat(from, ": ", e.what()));
        }
    }
    metadata_.clear();  // the free metadata: everything this class does not write itself
    for (const auto& [k, v] : st.metadata)
        if (!owned(k)) metadata_.emplace(k, v);
    return static_cast<std::int64_t>(st.get_u64("step"));
}

}  // namespace depthlab::train
