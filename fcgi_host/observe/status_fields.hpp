#pragma once
// The status page's fields, once: each row says what the text (and HTML) page, the JSON page and
// the metrics formats (OpenMetrics, Prometheus text) call it and how it reads it from a Snapshot.
// Every form walks this table (status_page.cpp), so a new field is one row, in every form alike.
// The per-route and per-worker series, histograms and the JSON page's nested objects are written
// by the pages themselves after the table.
#include "fcgi_host/observe/metrics.hpp"

#include <span>
#include <string>
#include <string_view>

namespace fcgi_host {

// One value of a field for one snapshot.
struct FieldValue {
  enum class Kind {
    Absent,  // not on any page this time (no memory figures)
    Unknown, // "-" on the text page, null in JSON, no sample
    Number,  // written as is in every form
    Text,    // text and JSON pages only ("-" on the text page when empty)
  };
  Kind kind = Kind::Absent;
  std::string value;
};

// Which forms show a field.
enum FieldForm : unsigned {
  kTextForm = 1,   // the text page and the HTML page's table
  kJsonForm = 2,   // the JSON page
  kMetricForm = 4, // OpenMetrics and the Prometheus text format
  kEveryForm = 7,
};

enum class MetricKind { Gauge, Counter };

struct StatusField {
  std::string_view key;    // the text and JSON pages' name (php-fpm's words where it has them)
  std::string_view metric; // fcgihost_NAME, a counter without _total
  MetricKind kind;
  std::string_view labels; // of its sample ("reason=\"crash\""): one family over several rows
  std::string_view help;   // the family's; empty on a row that continues the row above's family
  unsigned forms;
  FieldValue (*value)(const Snapshot&);
  // The text page's own form of the value, when not the number (the start time as a date).
  std::string (*shown)(const Snapshot&) = nullptr;
};

// The pool's fields, in the pages' order.
std::span<const StatusField> status_fields();

// Busy handler threads of all handler threads, 0 to 1 ("0" without any).
std::string utilization_text(const Snapshot& s);

} // namespace fcgi_host
