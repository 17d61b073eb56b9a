// seqinbox dev-kafka: see dev_kafka.hpp.
#include "dev_kafka.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "options.hpp"
#include "stop_signals.hpp"
#include "seqinbox/kafka/mock_cluster.hpp"

namespace seqinbox::cli {

namespace {

constexpr std::string_view usage_text =
    "usage: seqinbox dev-kafka [--topic NAME:PARTITIONS]... [--brokers N] [--bootstrap-file PATH]\n"
    "\n"
    "A Kafka cluster for trying things out and for tests, NOT for production: librdkafka's mock\n"
    "cluster inside this process, on loopback ports chosen by the system, keeping every record in\n"
    "memory only (all gone when it stops). Any Kafka client can use it: the relay, kcat, a service.\n"
    "Once ready it prints one line on stdout, `bootstrap.servers=HOST:PORT[,HOST:PORT...]`, then\n"
    "runs in the foreground until SIGTERM or SIGINT.\n"
    "\n"
    "options:\n"
    "  --topic NAME:PARTITIONS   create topic NAME with PARTITIONS partitions (1 to 1000; repeatable);\n"
    "                            a topic not created here is created with 4 partitions on first use\n"
    "  --brokers N               number of brokers (1 to 16, default 1)\n"
    "  --bootstrap-file PATH     also write the bootstrap servers, one line, to PATH (written whole,\n"
    "                            so a script may wait until it exists; removed on stop)\n"
    "\n"
    "exit status: 0 stopped on SIGTERM or SIGINT, 1 could not start (reason on stderr), 2 usage error\n";

struct topic_spec {
    std::string name;
    int partitions = 0;
};

struct dev_kafka_call {
    std::vector<topic_spec> topics;
    int brokers = 1;
    std::optional<std::filesystem::path> bootstrap_file;
};

/// Kafka's rule for topic names: 1 to 249 of [a-zA-Z0-9._-].
bool legal_topic_name(std::string_view name) {
    auto legal = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; };
    return !name.empty() && name.size() <= 249 && std::ranges::all_of(name, legal);
}

/// Parses the value of --topic, `NAME:PARTITIONS`.
topic_spec parse_topic(std::string_view text) {
    const auto colon = text.rfind(':');
    const std::string_view name = text.substr(0, colon == std::string_view::npos ? text.size() : colon);
    if (colon == std::string_view::npos || !legal_topic_name(name))
        throw usage_error("seqinbox dev-kafka: option '--topic' expects NAME:PARTITIONS with a topic name of letters, digits, "
                          "'.', '_' and '-' (e.g. orders:3), not '" + std::string(text) + "'");
    const std::string_view count = text.substr(colon + 1);
    int partitions = 0;
    auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), partitions);
    if (ec != std::errc{} || end != count.data() + count.size() || partitions < 1 || partitions > 1000)
        throw usage_error("seqinbox dev-kafka: option '--topic' expects a partition count from 1 to 1000 after the colon, not '" +
                          std::string(text) + "'");
    return {std::string(name), partitions};
}

void add_topic(dev_kafka_call& call, topic_spec topic) {
    if (std::ranges::any_of(call.topics, [&](const topic_spec& t) { return t.name == topic.name; }))
        throw usage_error("seqinbox dev-kafka: topic '" + topic.name + "' is given twice");
    call.topics.push_back(std::move(topic));
}

std::optional<dev_kafka_call> parse(std::span<const std::string_view> args) {
    dev_kafka_call call;
    for (option_reader r(args, "dev-kafka"); r.next();) {
        if (r.flag("--help") || r.flag("-h")) {
            std::cout << usage_text;
            return std::nullopt;
        }
        if (auto v = r.value("--topic")) add_topic(call, parse_topic(*v));
        else if (auto v = r.value("--brokers")) call.brokers = static_cast<int>(r.number("--brokers", *v, 1, 16));
        else if (auto v = r.value("--bootstrap-file")) call.bootstrap_file = std::filesystem::path(*v);
        else r.unknown();
    }
    return call;
}

/// Writes `text` to `path` under another name first, so that a reader sees all of it or no file.
void write_whole(const std::filesystem::path& path, const std::string& text) {
    auto partial = path;
    partial += ".partial";
    std::ofstream(partial) << text;
    std::error_code failed;
    std::filesystem::rename(partial, path, failed);
    if (failed) throw std::runtime_error("cannot write the bootstrap file '" + path.string() + "': " + failed.message());
}

std::string describe(const dev_kafka_call& call) {
    std::string text = "mock cluster of " + std::to_string(call.brokers) + (call.brokers == 1 ? " broker" : " brokers");
    for (std::size_t i = 0; i < call.topics.size(); ++i)
        text += (i == 0 ? ", topics " : ", ") + call.topics[i].name + " (" + std::to_string(call.topics[i].partitions) + ")";
    return text;
}

}  // namespace

int dev_kafka_command(std::span<const std::string_view> args) {
    const auto call = parse(args);
    if (!call) return exit_ok;
    const sigset_t signals = block_stop_signals();  // before the cluster starts its threads
    kafka::mock_cluster cluster(call->brokers);
    for (const auto& topic : call->topics) cluster.create_topic(topic.name, topic.partitions);
    const std::string servers = cluster.bootstraps();
    if (call->bootstrap_file) write_whole(*call->bootstrap_file, servers + '\n');
    std::cout << "bootstrap.servers=" << servers << std::endl;
    std::cerr << "seqinbox dev-kafka: " << describe(*call)
              << "; records in memory only, for trying things out and tests; stop with SIGTERM or Ctrl-C\n";
    const auto received = wait_for_stop_signal(signals);
    if (call->bootstrap_file) std::filesystem::remove(*call->bootstrap_file);
    std::cerr << "seqinbox dev-kafka: stopping on " << received << '\n';
    return exit_ok;
}

}  // namespace seqinbox::cli
