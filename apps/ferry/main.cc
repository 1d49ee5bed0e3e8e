// ferry — big model inference from Hugging Face folders. Entry point: subcommands and exit codes (cli.h).
#include <csignal>
#include <cstdio>
#include <exception>

#include "cli.h"
#include "commands.h"
#include "ferry/core/error.h"
#include "ferry/core/version.h"

int main(int argc, char** argv) {
  // A file-size limit (RLIMIT_FSIZE) or a full disk must surface as a write error with a message, not kill us.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"ferry: run models bigger than your memory, from Hugging Face folders (plan, load, ferry weights)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ferry " + std::string(ferry::kVersion));
  ferry::cli::add_generate_command(app);
  ferry::cli::add_plan_command(app);
  ferry::cli::add_inspect_command(app);
  ferry::cli::add_tokenize_command(app);
  ferry::cli::add_offload_command(app);
  ferry::cli::add_bench_command(app);
  ferry::cli::add_demo_command(app);
  ferry::cli::add_quantize_command(app);
  ferry::cli::add_serve_command(app);
  ferry::cli::add_chat_command(app);
  app.footer(
      "Exit codes: 0 ok, 1 error in the input (bad file, budget too small, ...), 2 bad command line, 3 internal "
      "error.\nExample: ferry generate -m ./TinyLlama-1.1B -p \"Once upon a time\" -n 64 --device-map auto "
      "--max-memory cpu=2GiB --offload-folder /tmp/offload");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? ferry::cli::kExitOk : ferry::cli::kExitUsage;
  } catch (const ferry::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ferry: error: %s\n", e.what());
    return ferry::cli::kExitError;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ferry: internal error: %s\n(this is a bug in ferry; please report it with the command)\n",
                 e.what());
    return ferry::cli::kExitInternal;
  }
  return ferry::cli::kExitOk;
}
