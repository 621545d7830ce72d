//! Results -> text: markdown for the terminal, `--report`, the GitHub comment and the job
//! summary; JSON; JUnit. Rendering never touches git, disk or the network.
pub mod bisect;
pub mod document;
pub mod escape;
pub mod junit;
pub mod matrix;
pub mod summary;
