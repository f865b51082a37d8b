// ctest: links mpiaccel; timeout 60
// Every kind of config error, with its exact one-line message: the message is
// the user interface of a config mistake, so it is pinned here word for word.
#define BOOST_TEST_MODULE config_errors
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "mpiaccel/config.hpp"

using mpiaccel::Config;
using mpiaccel::ConfigError;

namespace {

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    Config::parse(text, "run.ini", overrides);
  } catch (const ConfigError& e) {
    return e.message();
  }
  return "(no error)";
}

std::string set_error(const std::string& key, const std::string& value) {
  Config c;
  try {
    c.set(key, value);
  } catch (const ConfigError& e) {
    BOOST_TEST((c == Config{}), "a failed set changed the config");
    return e.message();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(unknown_section) {
  BOOST_TEST(error_of("[ddp]\nstatic_graph = 1\n\n[zeroo]\nstage = 1\n") ==
             "run.ini:4: [zeroo]: unknown section; did you mean 'zero'?");
  BOOST_TEST(error_of("; c\n[deepspeed]\n") ==
             "run.ini:2: [deepspeed]: unknown section; accepted: launch, distributed, parallelism, ddp, fsdp, "
             "zero, optimizer, scheduler, train, model, checkpoint, logging");
  // An empty unknown section is still an error (inih never calls back for it).
  BOOST_TEST(error_of("[Train]\n") == "run.ini:1: [Train]: unknown section; did you mean 'train'?");
}

BOOST_AUTO_TEST_CASE(unknown_key_suggests_the_nearest) {
  BOOST_TEST(error_of("[ddp]\nbucket_capmb = 4\n") ==
             "run.ini:2: [ddp] bucket_capmb: unknown key; did you mean 'bucket_cap_mb'?");
  // A transposition counts as one edit (Damerau).
  BOOST_TEST(error_of("[optimizer]\nlr = 1\nwieght_decay = 0\n") ==
             "run.ini:3: [optimizer] wieght_decay: unknown key; did you mean 'weight_decay'?");
  BOOST_TEST(error_of("[ddp]\nstage = 2\n") ==
             "run.ini:2: [ddp] stage: unknown key; it belongs in [zero]");
  BOOST_TEST(error_of("[scheduler]\nfrobnicate = 2\n") ==
             "run.ini:2: [scheduler] frobnicate: unknown key; accepted: name, warmup_steps, "
             "min_lr_ratio");
  BOOST_TEST(error_of("seed = 1\n[train]\n") ==
             "run.ini:1: seed: key before any [section]; accepted: a [section] header first, e.g. "
             "[launch]");
}

BOOST_AUTO_TEST_CASE(duplicate_key) {
  BOOST_TEST(error_of("[ddp]\nbucket_cap_mb = 4\n; again\nbucket_cap_mb = 8\n") ==
             "run.ini:4: [ddp] bucket_cap_mb: duplicate key, first set on line 2; accepted: each "
             "key once per file");
  // Also across two headers of the same section.
  BOOST_TEST(error_of("[zero]\nstage = 1\n[ddp]\n[zero]\nstage = 1\n") ==
             "run.ini:5: [zero] stage: duplicate key, first set on line 2; accepted: each key once "
             "per file");
  // The same key in two sections is not a duplicate.
  BOOST_TEST(error_of("[optimizer]\nname = sgd\n[scheduler]\nname = linear\n") == "(no error)");
}

BOOST_AUTO_TEST_CASE(type_errors) {
  BOOST_TEST(error_of("[train]\nbatch_size = eight\n") ==
             "run.ini:2: [train] batch_size: 'eight' is not an integer; accepted: >= 1");
  BOOST_TEST(error_of("[train]\nbatch_size = 8.0\n") ==
             "run.ini:2: [train] batch_size: '8.0' is not an integer; accepted: >= 1");
  BOOST_TEST(error_of("[train]\nmax_steps = 99999999999999999999\n") ==
             "run.ini:2: [train] max_steps: '99999999999999999999' does not fit a 64-bit integer; "
             "accepted: >= 1");
  BOOST_TEST(error_of("[ddp]\nstatic_graph = maybe\n") ==
             "run.ini:2: [ddp] static_graph: 'maybe' is not a bool; accepted: "
             "true|false|yes|no|on|off|1|0");
  BOOST_TEST(error_of("[optimizer]\nlr = 1e-3x\n") ==
             "run.ini:2: [optimizer] lr: '1e-3x' is not a number; accepted: > 0");
  BOOST_TEST(error_of("[optimizer]\nlr = nan\n") ==
             "run.ini:2: [optimizer] lr: 'nan' is not a finite number in double range; accepted: > 0");
  BOOST_TEST(error_of("[optimizer]\nlr =\n") ==
             "run.ini:2: [optimizer] lr: '' is not a number; accepted: > 0");
  BOOST_TEST(error_of("[optimizer]\nbetas = 0.9\n") ==
             "run.ini:2: [optimizer] betas: '0.9' is not two comma-separated numbers; accepted: "
             "two numbers 'a, b', each >= 0 and < 1");
  BOOST_TEST(error_of("[optimizer]\nbetas = 0.9, x\n") ==
             "run.ini:2: [optimizer] betas: 'x' is not a number; accepted: two numbers 'a, b', "
             "each >= 0 and < 1");
  BOOST_TEST(error_of("[checkpoint]\ndir = \"unterminated\n") ==
             "run.ini:2: [checkpoint] dir: the quote opened in '\"unterminated' is not closed (a ' "
             ";' inside quotes still starts a comment); accepted: a directory");
  BOOST_TEST(error_of("[checkpoint]\ndir = \"a ; b\"\n") ==
             "run.ini:2: [checkpoint] dir: the quote opened in '\"a' is not closed (a ' ;' inside "
             "quotes still starts a comment); accepted: a directory");
  BOOST_TEST(error_of("[checkpoint]\nresume =   ; nothing\n") ==
             "run.ini:2: [checkpoint] resume: the value is empty; accepted: none|latest|PATH");
}

BOOST_AUTO_TEST_CASE(range_and_choice_errors) {
  BOOST_TEST(error_of("[zero]\nstage = 4\n") ==
             "run.ini:2: [zero] stage: 4 is out of range; accepted: 0..3");
  BOOST_TEST(error_of("[train]\nbatch_size = 0\n") ==
             "run.ini:2: [train] batch_size: 0 is out of range; accepted: >= 1");
  BOOST_TEST(error_of("[optimizer]\nlr = 0\n") ==
             "run.ini:2: [optimizer] lr: 0 is out of range; accepted: > 0");
  BOOST_TEST(error_of("[distributed]\ntimeout_s = -5\n") ==
             "run.ini:2: [distributed] timeout_s: -5 is out of range; accepted: > 0");
  BOOST_TEST(error_of("[optimizer]\nbetas = 0.9, 1\n") ==
             "run.ini:2: [optimizer] betas: 1 is out of range; accepted: two numbers 'a, b', each "
             ">= 0 and < 1");
  BOOST_TEST(error_of("[scheduler]\nmin_lr_ratio = 1.5\n") ==
             "run.ini:2: [scheduler] min_lr_ratio: 1.5 is out of range; accepted: 0..1");
  BOOST_TEST(error_of("[distributed]\nstrategy = dpp\n") ==
             "run.ini:2: [distributed] strategy: 'dpp' is not one of the choices (did you mean "
             "'ddp'?); accepted: no|ddp|fsdp|zero");
  BOOST_TEST(error_of("[distributed]\nstrategy = deepspeed\n") ==
             "run.ini:2: [distributed] strategy: 'deepspeed' is not one of the choices; accepted: "
             "no|ddp|fsdp|zero");
}

BOOST_AUTO_TEST_CASE(too_long_line) {
  std::string value(190, 'x');
  BOOST_TEST(error_of("[launch]\nmpirun_args = " + value + "\n") ==
             "run.ini:2: [launch] mpirun_args: line is 204 characters long; accepted: at most 199 "
             "characters per line");
  BOOST_TEST(error_of("[launch]\n; " + value + value + "\n") ==
             "run.ini:2: [launch]: line is 382 characters long; accepted: at most 199 characters "
             "per line");
  // 199 characters is the limit, CR excluded.
  std::string fits = "mpirun_args = " + std::string(185, 'y');
  BOOST_TEST(fits.size() == 199u);
  BOOST_TEST(Config::parse("[launch]\r\n" + fits + "\r\n", "ok.ini").launch.mpirun_args ==
             std::string(185, 'y'));
  BOOST_TEST(error_of("[launch]\n" + fits + "z\n") ==
             "run.ini:2: [launch] mpirun_args: line is 200 characters long; accepted: at most 199 "
             "characters per line");
}

BOOST_AUTO_TEST_CASE(non_utf8_bytes) {
  // Latin-1, a lone continuation byte, an overlong '/', a surrogate, a cut sequence.
  BOOST_TEST(error_of("[train]\nmodel = gpt\xe9\n") ==
             "run.ini:2: byte 0xE9 at column 12 is not UTF-8; accepted: UTF-8 text (save the "
             "file as UTF-8)");
  BOOST_TEST(error_of("[train]\n; \x80\n").find("byte 0x80 at column 3 is not UTF-8") != std::string::npos);
  BOOST_TEST(error_of("[train]\n; \xc0\xaf\n").find("byte 0xC0 at column 3") != std::string::npos);
  BOOST_TEST(error_of("[train]\n; \xed\xa0\x80\n").find("byte 0xED at column 3") != std::string::npos);
  BOOST_TEST(error_of("[train]\n; \xe2\x82\n").find("byte 0xE2 at column 3") != std::string::npos);
  // Well-formed UTF-8 in comments and values is text like any other.
  BOOST_TEST(Config::parse("[train]\n; caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\nmodel = gpt\n",
                           "ok.ini").train.model == "gpt");
}

BOOST_AUTO_TEST_CASE(nul_bytes) {
  // inih would end the line at the NUL and read the rest as the next line.
  BOOST_TEST(error_of(std::string("[train]\nmodel = gpt\0x\n", 22)) ==
             "run.ini:2: line contains a NUL byte; accepted: text");
  BOOST_TEST(error_of(std::string("\0", 1)) == "run.ini:1: line contains a NUL byte; accepted: text");
}

BOOST_AUTO_TEST_CASE(syntax_errors) {
  BOOST_TEST(error_of("[ddp]\nstatic_graph = 1\njust some words\n") ==
             "run.ini:3: syntax error in 'just some words'; accepted: '[section]', 'key = value' "
             "or a ';' comment");
  BOOST_TEST(error_of("[ddp\nstatic_graph = 1\n") ==
             "run.ini:1: syntax error in '[ddp'; accepted: '[section]', 'key = value' or a ';' "
             "comment");
  // An indented line after a key is not glued onto its value (inih's multiline).
  BOOST_TEST(error_of("[launch]\nmpirun_args = --a\n    --b\n") ==
             "run.ini:3: syntax error in '--b'; accepted: '[section]', 'key = value' or a ';' "
             "comment");
}

BOOST_AUTO_TEST_CASE(the_first_error_in_the_file_is_reported) {
  // A handler error on line 2, a syntax error on line 3, an overlong line on 4.
  BOOST_TEST(error_of("[zero]\nstage = 9\nbroken\n; " + std::string(300, 'z') + "\n") ==
             "run.ini:2: [zero] stage: 9 is out of range; accepted: 0..3");
  BOOST_TEST(error_of("[zero]\nbroken\nstage = 9\n") ==
             "run.ini:2: syntax error in 'broken'; accepted: '[section]', 'key = value' or a ';' "
             "comment");
  BOOST_TEST(error_of("[zero]\n; " + std::string(300, 'z') + "\nstage = 9\n") ==
             "run.ini:2: [zero]: line is 302 characters long; accepted: at most 199 characters per "
             "line");
}

BOOST_AUTO_TEST_CASE(override_errors_name_the_override) {
  BOOST_TEST(error_of("", {"ddp.bucket_capmb=4"}) ==
             "override 'ddp.bucket_capmb=4': [ddp] bucket_capmb: unknown key; did you mean "
             "'bucket_cap_mb'?");
  BOOST_TEST(error_of("", {"zero.stage=5"}) ==
             "override 'zero.stage=5': [zero] stage: 5 is out of range; accepted: 0..3");
  BOOST_TEST(error_of("", {"zeros.stage=1"}) ==
             "override 'zeros.stage=1': [zeros]: unknown section; did you mean 'zero'?");
  BOOST_TEST(error_of("", {"stage=1"}) ==
             "override 'stage=1': not of the form section.key=value (e.g. ddp.bucket_cap_mb=4)");
  BOOST_TEST(error_of("", {"zero.stage"}) ==
             "override 'zero.stage': not of the form section.key=value (e.g. ddp.bucket_cap_mb=4)");
  // The file's own errors come first.
  BOOST_TEST(error_of("[zero]\nstage = 7\n", {"zeros.stage=1"}) ==
             "run.ini:2: [zero] stage: 7 is out of range; accepted: 0..3");
}

BOOST_AUTO_TEST_CASE(set_and_get_errors) {
  BOOST_TEST(set_error("train.batch_size", "-1") ==
             "set 'train.batch_size=-1': [train] batch_size: -1 is out of range; accepted: >= 1");
  BOOST_TEST(set_error("launch.mpirun_args", "--a ;b") ==
             "set 'launch.mpirun_args=--a ;b': [launch] mpirun_args: text contains whitespace "
             "followed by ';', which INI reads as a comment; accepted: any text");
  BOOST_TEST(set_error("launch.srun_args", "a\nb") ==
             "set 'launch.srun_args=a\nb': [launch] srun_args: text contains a line break; "
             "accepted: any text");
  BOOST_TEST(set_error("launch.srun_args", std::string(190, 's')) ==
             "set 'launch.srun_args=" + std::string(190, 's') +
                 "': [launch] srun_args: text of 190 characters makes the line 'srun_args = ...' "
                 "longer than 199 characters; accepted: any text");
  Config c;
  try {
    c.get("ddp.bucket");
    BOOST_FAIL("no error");
  } catch (const ConfigError& e) {
    BOOST_TEST(e.message() == "get 'ddp.bucket': [ddp] bucket: unknown key; accepted: "
                              "bucket_cap_mb, find_unused_parameters, gradient_as_bucket_view, "
                              "static_graph, node_shared_params, comm_hook, comm_wrapper, powersgd_rank, powersgd_start_iter, "
                           "powersgd_min_compression_rate, powersgd_error_feedback, powersgd_warm_start, "
                           "powersgd_orthogonalization_epsilon, powersgd_seed");
  }
  try {
    c.get("lr");
    BOOST_FAIL("no error");
  } catch (const ConfigError& e) {
    BOOST_TEST(e.message() == "get 'lr': not of the form section.key");
  }
}

BOOST_AUTO_TEST_CASE(missing_file) {
  try {
    Config::load_file("/nonexistent/x.ini");
    BOOST_FAIL("no error");
  } catch (const ConfigError& e) {
    BOOST_TEST(e.message() == "config file '/nonexistent/x.ini' not found: No such file or directory");
  }
  try {
    Config::load_file("/");
    BOOST_FAIL("no error");
  } catch (const ConfigError& e) {
    BOOST_TEST(e.message() == "config file '/' cannot be read: Is a directory");
  }
}
