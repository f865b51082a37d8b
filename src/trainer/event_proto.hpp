#pragma once
// The few protocol buffer messages of a TensorBoard event file, encoded by
// hand (tensorflow/core/util/event.proto, framework/summary.proto,
// tensor.proto): Event, Summary.Value with a simple_value or a string
// tensor, SummaryMetadata.PluginData, SessionLog.
//
// Why by hand, not with libprotobuf: the pip LibTorch exports symbols of the
// protobuf it bundles (google::protobuf::Arena::CreateMaybeMessage<onnx_torch::...>)
// and Debian's LibTorch links the system libprotobuf, so a third copy in the
// process is the clash SentencePiece's bundled protobuf caused (its shim,
// src/data/sentencepiece/shim.cpp, says how that went); and what the event
// format needs is five messages of strings, floats and varints. The test reads
// the files with tensorboard's own EventAccumulator.

#include <cstdint>
#include <string>

namespace mpiaccel::detail::event_proto {

/// Event{wall_time, step, file_version}.
std::string file_version_event(double wall_time, const std::string& version);
/// Event{wall_time, step, summary{value{tag, simple_value}}}.
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
/// Event{wall_time, step, summary{value{tag, metadata{plugin_data{"text"}},
/// tensor{DT_STRING, scalar shape, string_val}}}}.
std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text);
/// Event{wall_time, step, session_log{status START}}.
std::string session_start_event(double wall_time, int64_t step);

}  // namespace mpiaccel::detail::event_proto
