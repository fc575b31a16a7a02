//! The `opentelemetry` feature: a span's OpenTelemetry context to and from [`TraceParent`].
//!
//! Written and read directly rather than through the global `TextMapPropagator`: the wire
//! format is W3C Trace Context whatever an application configured, and a consumer must parse
//! what a hostile producer sent with warren's own strict parser.

use std::str::FromStr as _;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::context::{TraceParent, valid_tracestate};

/// Makes the remote span that published a message the parent of `span`, which must not have
/// started yet. Without an OpenTelemetry layer in the subscriber this does nothing.
pub(super) fn set_parent(span: &Span, parent: &TraceParent, state: Option<&str>) {
    let state = state
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let remote = SpanContext::new(
        TraceId::from_bytes(parent.trace_id),
        SpanId::from_bytes(parent.parent_id),
        TraceFlags::new(parent.flags),
        true,
        state,
    );
    // A fresh context, not the current one: nothing ambient leaks into a delivery's trace.
    let context = opentelemetry::Context::new().with_remote_span_context(remote);
    // Fails only without an OpenTelemetry layer, where there is no parent to set.
    let _ = span.set_parent(context);
}

/// The OpenTelemetry context of `span` as a `traceparent` and `tracestate`, or `None` when
/// it has none (no OpenTelemetry layer, or a span filtered out).
pub(super) fn of(span: &Span) -> Option<(TraceParent, Option<String>)> {
    let context = span.context();
    let otel = context.span();
    let span_context = otel.span_context();
    if !span_context.is_valid() {
        return None;
    }
    let parent = TraceParent {
        trace_id: span_context.trace_id().to_bytes(),
        parent_id: span_context.span_id().to_bytes(),
        flags: span_context.trace_flags().to_u8(),
    };
    let state = span_context.trace_state().header();
    let state = (!state.is_empty() && valid_tracestate(&state)).then_some(state);
    Some((parent, state))
}

/// Links `span` (a batch's) to the span that published one of its messages.
pub(super) fn link(span: &Span, parent: &TraceParent) {
    span.add_link(SpanContext::new(
        TraceId::from_bytes(parent.trace_id),
        SpanId::from_bytes(parent.parent_id),
        TraceFlags::new(parent.flags),
        true,
        TraceState::default(),
    ));
}
