// kvcanary: the command-line face of kvcanary (SPEC §5, SPEC-CANARY §9). Exit status: 0 success; 1 a disagreement
// (check, demo); 2 a rejected command line or input, with exactly one line on stderr; 3 an internal error.
// Nothing escapes main: every exception becomes one of these.

#include "canary_commands.hpp"
#include "cli_error.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "demo.hpp"
#include "openmp_wait.hpp"
#include "simulate_command.hpp"

#include <kvcanary/version.hpp>

#include <exception>
#include <iostream>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

// One line, whatever the source: line breaks become spaces and other control bytes (which a key or a
// file name can hold, and which a terminal would obey) become \xNN.
std::string printable(const std::string& message) {
  std::string line;
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r') {
      line += ' ';
    } else if (byte < 0x20 || byte == 0x7f) {
      const char* hex = "0123456789abcdef";
      line += {'\\', 'x', hex[byte >> 4], hex[byte & 15]};
    } else {
      line += c;
    }
  }
  return line;
}

// Kokkos reports a View it cannot allocate as a std::runtime_error (after catching its own std::bad_alloc):
// "Kokkos failed to allocate memory ..." in 3.4, "Kokkos ERROR: Host memory space failed to allocate 64 MiB
// (label=...)." from 4.x on (Kokkos::Experimental::BadAlloc in 5.2). It is an allocation failure all the
// same. Returns its first sentence, or null.
std::optional<std::string> kokkos_allocation_failure(const std::exception& e) {
  const std::string text = e.what();
  const bool kokkos_3 = text.rfind("Kokkos failed to allocate memory", 0) == 0;
  const bool kokkos_4 = text.rfind("Kokkos ERROR: ", 0) == 0 && text.find(" memory space failed to allocate ") != std::string::npos;
  if (!kokkos_3 && !kokkos_4) return std::nullopt;
  return text.substr(0, text.find(".  "));
}

std::string out_of_memory(const std::string& what) {
  return "rejected input: out of memory (" + what +
         "; within its limits kvcanary needs up to 1.5 GiB: docs/cli-limits.md)";
}

int fail(int status, const std::string& message) {
  std::cout.flush();
  std::cerr << "kvcanary: " << printable(message) << std::endl;
  return status;
}

int dispatch(int argc, char** argv) {
  using namespace kvcanary::cli;
  const CommandLine command_line = parse_command_line(argc, argv);
  switch (command_line.command) {
    case Command::Help: std::cout << usage_text(); return 0;
    case Command::Version: std::cout << "kvcanary " << KVCANARY_VERSION_STRING << '\n'; return 0;
    case Command::Plan: return plan_command(command_line, std::cout);
    case Command::Check: return check_command(command_line, std::cout);
    case Command::Demo: return demo_command(command_line, std::cout);
    case Command::Verify: return canary_command(command_line, CaseKind::Verify, std::cout);
    case Command::Write: return canary_command(command_line, CaseKind::Write, std::cout);
    case Command::Step: return canary_command(command_line, CaseKind::Step, std::cout);
    case Command::Simulate: return simulate_command(command_line.simulate_args, std::cout);
  }
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  kvcanary::cli::use_busy_host_openmp_settings(argv);  // before the OpenMP runtime starts (openmp_wait.hpp)
  try {
    const int status = dispatch(argc, argv);
    std::cout.flush();
    if (!std::cout) return fail(3, "error: cannot write to standard output");
    return status;
  } catch (const kvcanary::cli::UsageError& e) {
    return fail(2, std::string("usage error: ") + e.what() + " (see kvcanary --help)");
  } catch (const kvcanary::cli::RejectedInput& e) {
    return fail(2, std::string("rejected input: ") + e.what());
  } catch (const std::invalid_argument& e) {  // the library's host-side checks (SPEC §4)
    return fail(2, std::string("rejected input: ") + e.what());
  } catch (const std::bad_alloc& e) {
    return fail(2, out_of_memory(e.what()));
  } catch (const std::exception& e) {
    if (const auto allocation = kokkos_allocation_failure(e)) return fail(2, out_of_memory(*allocation));
    return fail(3, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(3, "internal error: unknown exception");
  }
}
