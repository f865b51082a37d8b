// `mpiaccel plot METRICS.jsonl [-o loss.png]`: loss (train and validation),
// learning rate and throughput against step, drawn by gnuplot (Debian's
// gnuplot-nox) from the trainer's JSON-lines metrics.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "launch_plan.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::tool {
namespace {

namespace fs = std::filesystem;

struct PlotArguments {
  std::string metrics;
  std::string output;
  std::string title;
};

PlotArguments parse_plot_arguments(const std::vector<std::string>& args) {
  PlotArguments out;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "-o" || a == "--output" || a == "--title") {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      (a == "--title" ? out.title : out.output) = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option '" + a + "'");
    } else if (out.metrics.empty()) {
      out.metrics = a;
    } else {
      throw UsageError("unexpected argument '" + a + "' (one metrics file)");
    }
  }
  if (out.metrics.empty()) throw UsageError("no metrics file given");
  if (out.output.empty()) out.output = fs::path(out.metrics).replace_extension(".png").string();
  if (out.title.empty()) out.title = fs::path(out.metrics).filename().string();
  return out;
}

// The numbers of one flat JSON object (the trainer writes nothing nested);
// strings, booleans and null are skipped. Returns false if `line` is not a
// JSON object.
bool parse_numbers(const std::string& line, std::map<std::string, double>& numbers) {
  size_t i = 0;
  auto skip_space = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
  };
  auto read_string = [&](std::string& text) {
    if (i >= line.size() || line[i] != '"') return false;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\') ++i;  // escapes only matter for finding the end
      text += line[i];
    }
    if (i >= line.size()) return false;
    ++i;
    return true;
  };
  skip_space();
  if (i >= line.size() || line[i] != '{') return false;
  ++i;
  skip_space();
  if (i < line.size() && line[i] == '}') return true;
  for (;;) {
    skip_space();
    std::string key, ignored;
    if (!read_string(key)) return false;
    skip_space();
    if (i >= line.size() || line[i] != ':') return false;
    ++i;
    skip_space();
    if (i >= line.size()) return false;
    if (line[i] == '"') {
      if (!read_string(ignored)) return false;
    } else if (line.compare(i, 4, "true") == 0 || line.compare(i, 4, "null") == 0) {
      i += 4;
    } else if (line.compare(i, 5, "false") == 0) {
      i += 5;
    } else {
      char* end = nullptr;
      double value = std::strtod(line.c_str() + i, &end);
      if (end == line.c_str() + i) return false;
      i = static_cast<size_t>(end - line.c_str());
      numbers[key] = value;
    }
    skip_space();
    if (i < line.size() && line[i] == ',') {
      ++i;
      continue;
    }
    if (i < line.size() && line[i] == '}') return true;
    return false;
  }
}

struct Series {
  // step → values; a resumed run appends steps it had logged before, and
  // the later line (the run that went on) wins.
  std::map<long, std::map<std::string, double>> train, validation;
  std::string throughput_key;  // tokens_per_s or samples_per_s
};

Series read_metrics(const std::string& path) {
  std::ifstream in(path);
  MPIACCEL_CHECK(in.good(), "cannot read '" + path + "': " + std::strerror(errno));
  Series series;
  std::string line;
  int number = 0;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  for (const auto& text : lines) {
    ++number;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::map<std::string, double> row;
    if (!parse_numbers(text, row)) {
      // The last line of a run that is still writing may be incomplete.
      if (number == static_cast<int>(lines.size())) break;
      MPIACCEL_THROW(path + ":" + std::to_string(number) + ": not a JSON object of metrics");
    }
    if (!row.count("step")) continue;
    long step = static_cast<long>(row["step"]);
    if (row.count("loss")) series.train[step] = row;
    if (row.count("val_loss")) series.validation[step] = row;
    for (const char* key : {"tokens_per_s", "samples_per_s"}) {
      if (row.count(key) && series.throughput_key.empty()) series.throughput_key = key;
    }
  }
  MPIACCEL_CHECK(!series.train.empty(), "'" + path +
                                            "' has no training rows (JSON lines with \"step\" and "
                                            "\"loss\", written by mpiaccel train's [logging] metrics_file)");
  return series;
}

// gnuplot strings in single quotes: a quote is written twice.
std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string column(const std::map<std::string, double>& row, const std::string& key) {
  auto it = row.find(key);
  if (it == row.end()) return "NaN";  // gnuplot skips NaN points
  char text[32];
  std::snprintf(text, sizeof(text), "%.10g", it->second);
  return text;
}

std::string gnuplot_script(const Series& series, const std::string& dir, const PlotArguments& args,
                           const std::string& png) {
  const std::string train = gnuplot_quote(dir + "/train.dat");
  const std::string validation = gnuplot_quote(dir + "/validation.dat");
  const bool tokens = series.throughput_key == "tokens_per_s";
  std::ostringstream s;
  s << "set terminal pngcairo size 900,1050 font 'DejaVu Sans,10' noenhanced\n"
    << "set output " << gnuplot_quote(png) << "\n"
    << "set multiplot layout 3,1 title " << gnuplot_quote(args.title) << " font ',12'\n"
    << "set grid\nset key top right\nset xlabel 'step'\nset lmargin 12\n"
    // x: exactly the logged steps; y: a margin so no point sits on the frame.
    << "set autoscale xfix\nset offsets 0, 0, graph 0.05, graph 0.05\n"
    << "set ylabel 'loss'\n"
    << "plot " << train << " using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'train'";
  if (!series.validation.empty()) {
    s << ", " << validation << " using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb '#d62728' title 'validation'";
  }
  s << "\nset ylabel 'learning rate'\nset format y '%.1e'\n"
    << "plot " << train << " using 1:3 with lines lw 2 lc rgb '#2ca02c' notitle\n"
    << "set format y '%g'\nset offsets 0, 0, graph 0.05, 0\nset yrange [0:*]\n"
    << "set ylabel " << gnuplot_quote(tokens ? "tokens/s" : "samples/s") << "\n"
    << "plot " << train << " using 1:4 with linespoints lw 1 pt 7 ps 0.5 lc rgb '#9467bd' notitle\n"
    << "unset multiplot\n";
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  MPIACCEL_CHECK(out.good(), "cannot write '" + path + "'");
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

int run_plot(const std::vector<std::string>& args, int*, char***) {
  auto parsed = parse_plot_arguments(args);
  Series series = read_metrics(parsed.metrics);
  MPIACCEL_CHECK(on_path("gnuplot"),
                 "gnuplot not found on PATH; install Debian's gnuplot-nox (`make deps`, or "
                 "apt-get install gnuplot-nox)");

  std::string pattern = (fs::temp_directory_path() / "mpiaccel-plot-XXXXXX").string();
  MPIACCEL_CHECK(mkdtemp(pattern.data()) != nullptr,
                 "cannot create a temporary directory: " + std::string(std::strerror(errno)));
  const std::string dir = pattern;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{dir};

  std::string train = "# step loss lr " + series.throughput_key + "\n";
  for (const auto& [step, row] : series.train) {
    train += std::to_string(step) + " " + column(row, "loss") + " " + column(row, "lr") + " " +
             column(row, series.throughput_key) + "\n";
  }
  std::string validation = "# step val_loss\n";
  for (const auto& [step, row] : series.validation) {
    validation += std::to_string(step) + " " + column(row, "val_loss") + "\n";
  }
  write_text(dir + "/train.dat", train);
  write_text(dir + "/validation.dat", validation);
  // gnuplot draws into the temporary directory; the picture is copied to its
  // place only when complete.
  const std::string png = dir + "/plot.png";
  write_text(dir + "/plot.gp", gnuplot_script(series, dir, parsed, png));

  const std::string command = "gnuplot " + shell_quote(dir + "/plot.gp") + " > " +
                              shell_quote(dir + "/gnuplot.log") + " 2>&1";
  int status = std::system(command.c_str());
  if (status != 0 || !fs::exists(png) || fs::file_size(png) == 0) {
    std::ifstream log(dir + "/gnuplot.log");
    std::string why, line;
    while (std::getline(log, line)) {
      if (line.find_first_not_of(" ^") != std::string::npos) why += (why.empty() ? "" : " | ") + line;
    }
    MPIACCEL_THROW("gnuplot failed (status " + std::to_string(status) + "): " + why);
  }
  std::error_code error;
  fs::copy_file(png, parsed.output, fs::copy_options::overwrite_existing, error);
  MPIACCEL_CHECK(!error, "cannot write '" + parsed.output + "': " + error.message());
  std::printf("mpiaccel plot: %s (%zu training points, %zu evaluations)\n", parsed.output.c_str(),
              series.train.size(), series.validation.size());
  return 0;
}

}  // namespace

extern const Command kPlotCommand = {
    "plot", "draw loss, learning rate and throughput of a metrics file (gnuplot)",
    "usage: mpiaccel plot METRICS.jsonl [-o OUT.png] [--title TEXT]\n\n"
    "Draws three panels against step from the JSON lines `mpiaccel train` writes to\n"
    "[logging] metrics_file: loss (train, and validation where evaluated), learning rate,\n"
    "and throughput (tokens/s or samples/s). A resumed run that appended to the same file\n"
    "is drawn once per step (the later line wins). Needs gnuplot (Debian: gnuplot-nox,\n"
    "installed by `make deps`).\n\n"
    "options:\n"
    "  -o OUT.png, --output OUT.png  the picture (default: METRICS with .png)\n"
    "  --title TEXT                  the title (default: the metrics file's name)\n",
    run_plot};

}  // namespace mpiaccel::tool
