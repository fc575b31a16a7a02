//! The JSON Schema keywords (2020-12, and the draft-07 spellings warren accepts) by where
//! their value holds schemas: the one table the bundler walks and `warren diff` compares by.

/// Keywords whose value is one subschema (`items` may also be a draft-07 tuple of them).
pub const SUBSCHEMA: &[&str] = &[
    "items",
    "additionalItems",
    "contains",
    "additionalProperties",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];

/// Keywords whose value is an array of subschemas, which count by position.
pub const SUBSCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords whose value maps names to subschemas (draft-07 `dependencies` may also map to
/// arrays of property names, which hold no schema).
pub const SUBSCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "$defs",
    "definitions",
];

/// Keywords that hold definitions rather than the schema itself.
pub const DEFINITIONS: &[&str] = &["$defs", "definitions"];

/// Keywords that only make sense in a standalone document, not at a node of one.
pub const DOCUMENT: &[&str] = &["$id", "$schema", "$anchor", "$dynamicAnchor"];
