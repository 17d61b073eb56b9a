#pragma once
// The words of a run's trace: what a step is about to do, the message it works on, and where its
// task got to. A friend of the simulation, kept apart so that simulation.hpp stays readable.
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "listener_probe.hpp"
#include "operations.hpp"
#include "sim_source.hpp"
#include "steps.hpp"

namespace seqinbox::sim {

template <class Sim>
struct trace_text {
    static std::string failure_text(const std::exception_ptr& failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            return e.what();
        } catch (...) {
            return "unknown exception";
        }
    }

    /// The logical message a step works on: the arriving one, or the one its consumer decides.
    static std::optional<claim_key> subject(const Sim& sim, const step& s) {
        if (const auto* a = std::get_if<arrive>(&s)) return sim.scenario_.work.messages[sim.scenario_.work.deliveries[a->delivery].message].key();
        return std::visit([&](const auto& k) -> std::optional<claim_key> {
            if constexpr (requires { k.consumer; }) {
                if (k.consumer >= sim.consumers_.size()) return std::nullopt;
                const auto& current = sim.consumers_[k.consumer]->report.current;
                if (sim.tasks_[k.consumer] && current) return key_of(*current);
            }
            return std::nullopt;
        }, s);
    }

    static std::string current_delivery(const Sim& sim, std::size_t consumer) {
        if (consumer >= sim.consumers_.size()) return "";
        const auto& current = sim.consumers_[consumer]->report.current;
        if (!current) return "";
        const std::size_t batch = sim.consumers_[consumer]->report.batch;
        std::string text = " [" + (batch > 0 ? "batch of " + std::to_string(batch) + " from " : std::string()) +
                           std::string(current->find_header("message-type").value_or("")) + "/" +
                           std::string(current->find_header("idempotence-id").value_or("")) + " " + current->key.value_or("");
        if (const auto* call = sim.probe_.running(consumer)) text += ", listener of " + listener_probe::text(call->key);
        return text + "]";
    }

    static std::string describe_step(const Sim& sim, const step& s) {
        std::string text = describe(s);
        if (const auto* a = std::get_if<arrive>(&s)) {
            const auto& d = sim.scenario_.work.deliveries[a->delivery];
            const auto& m = sim.scenario_.work.messages[d.message];
            const std::string number = m.number ? " #" + std::to_string(*m.number) : "";
            return text + " " + m.type + "/" + m.id + number + " " + m.context + " -> c" + std::to_string(d.consumer);
        }
        if (const auto* r = std::get_if<request_action>(&s)) {
            const auto request = action_requests(sim.store_, sim.scenario_.numbered())[r->target];
            return text + " " + request.action_name() + " " + request.target;
        }
        std::visit([&](const auto& k) {
            if constexpr (requires { k.consumer; })
                text += " at " + (sim.at(k.consumer).empty() ? std::string("(idle)") : std::string(sim.at(k.consumer))) + current_delivery(sim, k.consumer);
        }, s);
        return text;
    }

    static std::string after_step(const Sim& sim, const step& s) {
        std::string text;
        std::visit([&](const auto& k) {
            if constexpr (requires { k.consumer; }) {
                if (std::is_same_v<std::decay_t<decltype(k)>, advance>)
                    text = " -> " + (sim.at(k.consumer).empty() ? std::string("done") : std::string(sim.at(k.consumer))) +
                           (sim.blocked_[k.consumer] ? " (blocked)" : "");
            }
        }, s);
        return text;
    }
};

}  // namespace seqinbox::sim
