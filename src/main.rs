use std::process::ExitCode;

fn main() -> ExitCode {
    herdsim::cli::main()
}
