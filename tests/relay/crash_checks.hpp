#pragma once
// What the relay's crash and failover tests check after their crashes: the repeats each crash
// caused, per consumer thread (from the decision lines each thread logs), and the database: no
// PROCESSED message without its claim, no WAITING message whose release condition is met, no
// message or claim in an instance of another context. Each finding is one line naming the rows.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <soci/soci.h>

#include "seqinbox/declare/sequence.hpp"
#include "kafka/order_workload.hpp"
#include "seqinbox/envelope.hpp"

namespace seqinbox::test {

/// Keeps the records' shuffled order only among about `window` contexts at a time: every stretch
/// of the run then creates sequence instances, whose creation a crash may interrupt.
inline void shuffle_in_windows(seqinbox::testing::order_workload& work, std::size_t window) {
    std::map<std::string, std::size_t> stretch;
    for (std::size_t c = 0; c < work.contexts.size(); ++c) stretch[work.contexts[c]] = c / window;
    std::ranges::stable_sort(work.records, {}, [&](const seqinbox::envelope& r) { return stretch.at(r.key.value_or("")); });
}

/// A line of a relay's log that published a message: a decision "processed" or "released".
struct publication_line {
    std::string time;    ///< as logged (ISO-8601 UTC, milliseconds): ordered as text
    std::string thread;  ///< "relay 2, consumer 3"
};
using message_key = std::pair<std::string, std::string>;  // message type, idempotence id

/// Each message's publication lines in the logs of relays 1 to `relays` (one after another), in
/// log order. A consumer thread's lines name it: "... info consumer 2: processed T/ID context C".
inline std::map<message_key, std::vector<publication_line>> publication_lines(const std::filesystem::path& dir, int relays) {
    std::map<message_key, std::vector<publication_line>> found;
    for (int n = 1; n <= relays; ++n) {
        std::ifstream log(dir / ("relay-" + std::to_string(n) + ".log"));
        for (std::string line; std::getline(log, line);) {
            const auto thread = line.find(" consumer ");
            const auto colon = thread == std::string::npos ? thread : line.find(": ", thread);
            if (colon == std::string::npos) continue;
            const auto verb = line.find(' ', colon + 2);
            const auto what = line.substr(colon + 2, verb == std::string::npos ? 0 : verb - colon - 2);
            if (what != "processed" && what != "released") continue;
            const auto slash = line.find('/', verb);
            const auto context = line.find(" context ", slash);
            if (slash == std::string::npos || context == std::string::npos) continue;
            found[{line.substr(verb + 1, slash - verb - 1), line.substr(slash + 1, context - slash - 1)}].push_back(
                {line.substr(0, line.find(' ')), "relay " + std::to_string(n) + ", " + line.substr(thread + 1, colon - thread - 1)});
        }
    }
    return found;
}

/// Repeated output records and the contexts they belong to.
struct repeat_count {
    std::size_t records = 0;
    std::set<std::string> contexts;
};

/// The repeats one crash caused, in all and per consumer thread whose decisions it undid.
struct crash_repeats {
    repeat_count all;
    std::map<std::string, repeat_count> by_thread;  // "relay 1, consumer 2"; "unlogged": no line
};

/// The repeats each crash caused ([k - 1]: crash k; [crashes]: no crash, none expected). A
/// repeat publishes again a message whose earlier decision a crash undid. The copies of a
/// message (they share an output partition: the context id is the partition key) match its
/// publication lines from the last backwards: a decision logged by a relay killed before its
/// producer sent the record has no copy. The line of the copy before the repeat names the
/// thread whose batch was undone, and its time the crash that undid it: the first that was not
/// over yet (`crash_ends`; a decision logged while PostgreSQL stopped, or was down, is in a batch
/// that cannot commit). A copy without a line (its decision died before it was logged) counts
/// for the last crash whose mark (the output topic's end offsets as it began) the repeat
/// follows. Each repeat is listed in `listing` (for the evidence).
inline std::vector<crash_repeats> repeats_of_each_crash(const std::vector<seqinbox::envelope>& records, const std::vector<std::string>& crash_ends,
                                                 const std::vector<std::vector<std::int64_t>>& marks,
                                                 const std::map<message_key, std::vector<publication_line>>& lines, std::ostream& listing) {
    std::map<message_key, std::vector<const seqinbox::envelope*>> copies;
    for (const auto& r : records)
        copies[{std::string(r.find_header("message-type").value_or("")), std::string(r.find_header("idempotence-id").value_or(""))}]
            .push_back(&r);
    const std::size_t none = crash_ends.size();
    std::vector<crash_repeats> repeats(none + 1);
    static const std::vector<publication_line> no_lines;
    for (const auto& [key, its_copies] : copies) {
        const auto found = lines.find(key);
        const auto& its_lines = found == lines.end() ? no_lines : found->second;
        const auto unmatched = static_cast<std::ptrdiff_t>(its_lines.size()) - static_cast<std::ptrdiff_t>(its_copies.size());
        for (std::size_t copy = 1; copy < its_copies.size(); ++copy) {
            const auto& r = *its_copies[copy];
            const auto undone = static_cast<std::ptrdiff_t>(copy) - 1 + unmatched;  // the line of the copy before
            std::size_t crash = 0;  // the index of the crash that undid the copy before (`none`: no crash)
            std::string thread = "unlogged";
            if (undone >= 0) {
                const auto& line = its_lines[static_cast<std::size_t>(undone)];
                crash = static_cast<std::size_t>(std::ranges::count_if(crash_ends, [&](const auto& end) { return end < line.time; }));
                thread = line.thread;
            } else {
                crash = static_cast<std::size_t>(std::ranges::count_if(
                            marks, [&](const auto& ends) { return ends.at(static_cast<std::size_t>(r.partition)) <= r.offset; })) -
                        1;  // SIZE_MAX before the first mark
            }
            auto& of = repeats[std::min(crash, none)];
            for (auto* count : {&of.all, &of.by_thread[thread]}) {
                ++count->records;
                count->contexts.insert(r.key.value_or(""));
            }
            listing << key.second << " repeated at output partition " << r.partition << " offset " << r.offset << ": crash "
                    << (crash < none ? std::to_string(crash + 1) : "none") << " undid " << thread << "'s decision\n";
        }
    }
    return repeats;
}

/// A crash undoes at most one batch per consumer thread (the decisions it logged since its last
/// commit), and the repeats are its messages and those their release passes replayed: a context
/// each, at most batch_size contexts per thread and crash. Nothing repeats without a crash.
inline void expect_repeats_within_one_batch_per_thread_per_crash(const std::vector<crash_repeats>& repeats,
                                                                 const std::vector<std::string>& crash_kinds, int consumer_threads,
                                                                 int batch_size) {
    const auto crashes = crash_kinds.size();
    std::string summary;
    std::size_t contexts = 0;
    for (std::size_t k = 0; k < crash_kinds.size(); ++k) {
        const auto& of = repeats[k];
        summary += " " + std::to_string(of.all.records) + "/" + std::to_string(of.all.contexts.size());
        contexts += of.all.contexts.size();
        std::string threads;
        for (const auto& [thread, count] : of.by_thread) {
            threads += "; " + thread + ": " + std::to_string(count.records) + "/" + std::to_string(count.contexts.size());
            BOOST_TEST((thread == "unlogged" || count.contexts.size() <= static_cast<std::size_t>(batch_size)),
                       "crash " << k + 1 << " undid more than a batch of " << thread << ": " << count.contexts.size() << " contexts");
        }
        BOOST_TEST_MESSAGE("crash " << k + 1 << " (" << crash_kinds[k] << "): " << of.all.records << " repeated records/"
                                    << of.all.contexts.size() << " contexts" << threads);
    }
    BOOST_TEST_MESSAGE("repeated records/contexts per crash:" << summary);
    BOOST_TEST(repeats.back().all.records == 0u, repeats.back().all.records << " repeats that no crash explains");
    BOOST_TEST(contexts <= static_cast<std::size_t>(consumer_threads * batch_size) * crashes,
               "repeats in " << contexts << " contexts after " << crashes << " crashes with " << consumer_threads << " threads");
}

// The database check. Each finding is one line naming the rows.

inline std::vector<std::string> lines_of(soci::session& db, const std::string& sql) {
    std::vector<std::string> lines;
    soci::rowset<std::string> rows = (db.prepare << sql);
    for (const auto& line : rows) lines.push_back(line);
    return lines;
}

inline std::vector<std::string> processed_without_their_claim(soci::session& db) {
    return lines_of(db,
                    "SELECT m.message_type || '/' || m.idempotence_id || ' PROCESSED in instance ' || m.sequence_instance_id"
                    " || ', claim: ' || coalesce('instance ' || c.sequence_instance_id, 'none')"
                    " FROM sequenced_message m LEFT JOIN sequential_inbox_idempotence c"
                    " ON c.message_type = m.message_type AND c.idempotence_id = m.idempotence_id"
                    " WHERE m.state = 'PROCESSED' AND c.sequence_instance_id IS DISTINCT FROM m.sequence_instance_id");
}

/// Messages and claims whose instance belongs to another context than the one their record
/// carried (`context_of`: idempotence id -> context id, from the produced records).
inline std::vector<std::string> in_another_context(soci::session& db, const std::map<std::string, std::string>& context_of) {
    std::vector<std::string> found;
    for (const char* table : {"sequenced_message", "sequential_inbox_idempotence"}) {
        soci::rowset<soci::row> rows = (db.prepare << std::string("SELECT t.idempotence_id, i.id, i.context_id FROM ") + table +
                                                          " t JOIN sequence_instance i ON i.id = t.sequence_instance_id");
        for (const auto& row : rows) {
            const auto id = row.get<std::string>(0);
            const auto context = row.get<std::string>(2);
            const auto expected = context_of.find(id);
            if (expected == context_of.end() || expected->second != context)
                found.push_back(std::string(table) + " " + id + " in instance " + std::to_string(row.get<long long>(1)) +
                                " of context " + context);
        }
    }
    return found;
}

/// WAITING messages whose release condition the PROCESSED types of their instance meet.
inline std::vector<std::string> waiting_though_released(soci::session& db, const seqinbox::declarations<std::string>& decls) {
    std::map<long long, std::set<std::string>> processed;                       // instance -> types
    std::vector<std::tuple<long long, std::string, std::string>> waiting;  // instance, type, id
    soci::rowset<soci::row> rows = (db.prepare << "SELECT sequence_instance_id, message_type, idempotence_id, state FROM sequenced_message");
    for (const auto& row : rows) {
        if (row.get<std::string>(3) == "PROCESSED") processed[row.get<long long>(0)].insert(row.get<std::string>(1));
        if (row.get<std::string>(3) == "WAITING") waiting.emplace_back(row.get<long long>(0), row.get<std::string>(1), row.get<std::string>(2));
    }
    std::vector<std::string> found;
    for (const auto& [instance, type, id] : waiting)
        for (const auto& sequence : decls.sequences)
            for (const auto& message : sequence.messages)
                if (message.qualified_type() == type &&
                    message.release.satisfied([&](const std::string& t) { return processed[instance].contains(t); }))
                    found.push_back(type + "/" + id + " WAITING in instance " + std::to_string(instance) + ", its condition met");
    return found;
}

inline std::string listed(const std::vector<std::string>& findings, std::size_t at_most = 10) {
    std::string text;
    for (std::size_t i = 0; i < std::min(at_most, findings.size()); ++i) text += "\n  " + findings[i];
    if (findings.size() > at_most) text += "\n  ... " + std::to_string(findings.size() - at_most) + " more";
    return text;
}

}  // namespace seqinbox::test
