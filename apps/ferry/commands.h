// The subcommands of `ferry`; each adds itself to the app and runs from its CLI11 callback.
#pragma once

#include <CLI/CLI.hpp>

namespace ferry::cli {

void add_inspect_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_offload_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_chat_command(CLI::App& app);

}  // namespace ferry::cli
