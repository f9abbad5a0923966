//! The decoders' private error: why a text did not decode, before the
//! caller attaches the type and column. It never holds the text itself, so
//! row data cannot reach a log through it.

use super::super::SpecialValue;

/// Why a text did not decode, before the type is attached. Never the text itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::source::types) enum Fault {
    Malformed(&'static str),
    OutOfRange(&'static str),
    Special(SpecialValue),
}

pub(in crate::source::types) type Parsed<T> = Result<T, Fault>;
