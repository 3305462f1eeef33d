#pragma once
// Sharding work that is not a training step: a contiguous range of n items per rank
// (shard_range), a round-robin split (owner_of), and gathering each rank's variable-size
// results on every rank (all_gather_bytes), e.g. decoded sentences or analysis entries
// serialised as JSON.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "depthlab/dist/communicator.hpp"

namespace depthlab::dist {

/// Items [begin, end) of n for this rank: contiguous, in rank order, sizes differing by at
/// most one (gathering the ranks' results in rank order restores the original order).
inline std::pair<std::size_t, std::size_t> shard_range(std::size_t n, const communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank()), w = static_cast<std::size_t>(comm.size());
    return {n * r / w, n * (r + 1) / w};
}

/// The rank that handles item i of a round-robin split (balanced when items cost alike in
/// runs, e.g. the modules of one layer after another).
inline int owner_of(std::size_t i, const communicator& comm) { return static_cast<int>(i % static_cast<std::size_t>(comm.size())); }

/// Every rank's bytes, in rank order, on every rank (two collectives: the sizes, then the
/// data padded to the largest).
inline std::vector<std::string> all_gather_bytes(communicator& comm, const std::string& mine) {
    if (!comm.distributed()) return {mine};
    auto& c = comm.host_side();
    const auto n = static_cast<std::size_t>(c.size());
    const std::int64_t size = static_cast<std::int64_t>(mine.size());
    std::vector<std::int64_t> sizes(n);
    c.all_gather(&size, 1, sizes.data());
    const auto longest = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));
    std::vector<std::uint8_t> send(std::max<std::size_t>(longest, 1), 0), all(send.size() * n);
    std::copy(mine.begin(), mine.end(), send.begin());
    c.all_gather(send.data(), send.size(), all.data());
    std::vector<std::string> out(n);
    for (std::size_t r = 0; r < n; ++r) {
        const auto* p = reinterpret_cast<const char*>(all.data() + r * send.size());
        out[r].assign(p, static_cast<std::size_t>(sizes[r]));
    }
    return out;
}

/// The concatenation, in rank order, of every rank's strings (e.g. each rank's slice of
/// shard_range): the whole list on every rank.
inline std::vector<std::string> all_gather_strings(communicator& comm, const std::vector<std::string>& mine) {
    if (!comm.distributed()) return mine;
    std::string packed;
    for (const auto& s : mine) {
        const std::uint64_t len = s.size();
        packed.append(reinterpret_cast<const char*>(&len), sizeof len);
        packed += s;
    }
    std::vector<std::string> out;
    for (const std::string& blob : all_gather_bytes(comm, packed)) {
        for (std::size_t at = 0; at < blob.size();) {
            std::uint64_t len = 0;
            std::copy_n(blob.data() + at, sizeof len, reinterpret_cast<char*>(&len));
            at += sizeof len;
            out.emplace_back(blob.substr(at, len));
            at += len;
        }
    }
    return out;
}

}  // namespace depthlab::dist
