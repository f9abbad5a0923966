//! SQL text built at run time: identifiers quoted for the statements the
//! connector writes itself (slots, publications, START_REPLICATION).

/// Quotes an identifier for SQL.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
