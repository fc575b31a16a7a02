//! Stage 2: payload and headers schemas, loaded from JSON or YAML files and bundled into one
//! root with every cross-file `$ref` resolved.

mod bundle;
pub(crate) mod expansion;
pub mod keywords;
pub(crate) mod reference;

pub(crate) use bundle::{Bundler, DIALECT, EntryError};
pub use bundle::{SchemaBundle, schema_refs};
pub(crate) use reference::NodeKey;
