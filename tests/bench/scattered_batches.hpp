#pragma once
// bench_relay's inbox figure on the relay's own records: 4 threads, one inbox each on a shared
// PostgreSQL store, each deciding the records of one input partition in their order, in batches
// of the relay's size, without Kafka (no listener work). What the store's batch path gives on
// the same records is the ceiling of the relay on them.
#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.hpp"
#include "seqinbox/inbox.hpp"
#include "seqinbox/memory/error_sink.hpp"
#include "seqinbox/memory/source.hpp"
#include "seqinbox/postgresql/store.hpp"

namespace seqinbox::bench {

/// Decides `partitions` (one thread each) in batches of `batch_records`; records per second
/// from the first batch to the last decision. Every message is PROCESSED at the end, or it throws.
template <class Declarations>
double decide_partitions(postgresql::store& store, const Declarations& decls, const std::vector<std::vector<envelope>>& partitions,
                         std::size_t batch_records) {
    using inbox_type = basic_inbox<postgresql::store, memory::source, memory::error_sink>;
    struct member {
        memory::source source;
        memory::error_sink sink;
        std::unique_ptr<inbox_type> inbox;
    };
    std::vector<std::unique_ptr<member>> members;
    for (std::size_t i = 0; i < partitions.size(); ++i) {
        auto m = std::make_unique<member>();
        m->inbox = std::make_unique<inbox_type>(store, m->source, m->sink, decls);
        for (const auto& sequence : decls.sequences)
            for (const auto& message : sequence.messages)
                m->inbox->on(message.qualified_type(), [](const std::string&, const inbox_type::context&) {});
        members.push_back(std::move(m));
    }
    std::vector<std::exception_ptr> failures(partitions.size());
    std::size_t records = 0;
    for (const auto& p : partitions) records += p.size();
    const auto started = clock_type::now();
    {
        std::vector<std::jthread> threads;
        for (std::size_t i = 0; i < partitions.size(); ++i)
            threads.emplace_back([&, i] {
                try {
                    const std::span<const envelope> all(partitions[i]);
                    for (std::size_t first = 0; first < all.size(); first += batch_records)
                        members[i]->inbox->deliver_batch(all.subspan(first, std::min(batch_records, all.size() - first)));
                } catch (...) {
                    failures[i] = std::current_exception();
                }
            });
    }
    const double seconds = elapsed_s(started, clock_type::now());
    for (const auto& f : failures)
        if (f) std::rethrow_exception(f);
    for (const auto& m : members) require(m->sink.size() == 0, "scattered batches: the error sink is not empty");
    return static_cast<double>(records) / seconds;
}

}  // namespace seqinbox::bench
