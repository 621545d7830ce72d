//! The pure core: no git, processes, files, clock, clap or network. Everything here is a
//! function of its inputs, so it is tested exhaustively and shared by every command.
pub mod applied;
pub mod build;
pub mod buildset;
pub mod ccache;
pub mod config;
pub mod evidence;
pub mod fanout;
pub mod flaky;
pub mod gguf;
pub mod id;
pub mod jobs;
pub mod judge;
pub mod kinds;
pub mod layout;
pub mod matrix;
pub mod outcome;
pub mod plan;
pub mod progress;
pub mod range;
pub mod result;
pub mod search;
pub mod settings;
pub mod shell;
pub mod spelling;
