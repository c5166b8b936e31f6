//! The `marmoset` binary: everything is in the library (see `lib.rs`).

fn main() -> std::process::ExitCode {
    marmoset::process::start::main()
}
