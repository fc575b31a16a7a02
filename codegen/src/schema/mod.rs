//! Stage 2: payload and headers schemas, loaded from JSON or YAML files and bundled into one
//! root with every cross-file `$ref` resolved.

mod bundle;
pub mod reference;

pub use bundle::{Bundler, EntryError, SchemaBundle};
pub use reference::NodeKey;
