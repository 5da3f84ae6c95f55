//! Tests of the consumer group engine.
