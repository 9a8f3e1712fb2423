#!/usr/bin/env python3
"""What a person sees and types, in mpi_test.py's style: a run piped (timestamped lines, no terminal
codes) and on a pseudo-terminal (a bar that fits, cleared before each line), and Ctrl-C there:
  output_lines_and_bar          piped lines; the bar on a 120-column terminal
  ctrl_c_interrupts             Ctrl-C stops the run as "interrupted", with model.pt and a summary
Run one: terminal_test.py --mpirl build/mpirl CASE"""
import os
import re
import signal
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import ENV, check, command, run, summary, wait_for_rows, ranks_left  # noqa: E402


def run_on_pty(cmd, env, columns, until=None, keys=b""):
    """Runs CMD as the foreground job of a new pseudo-terminal COLUMNS wide; once until() holds,
    types KEYS. Returns (exit code, everything the terminal showed)."""
    import fcntl
    import pty
    import struct
    import termios
    import threading
    pid, fd = pty.fork()
    if pid == 0:  # session leader with the pty as its terminal
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        os.execvpe(cmd[0], cmd, env)
    seen = bytearray()

    def read_all():
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        if until is not None:
            check(until(), "ready for the keys")
            os.write(fd, keys)
        reader.join(300)
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def case_output_lines_and_bar(args):
    # What a person sees. Piped (a Slurm .out, `| tee`): timestamped lines, no terminal codes,
    # although Open MPI gives every rank a pseudo-terminal. On a 120-column terminal (not 80, the
    # width assumed when none can be read): a bar redrawn in place that fits and uses the room, and
    # every log line and the final status line clear it first instead of being glued to it.
    p, _, d = run(args, 4, ["run.total_env_steps=400000", "run.log_interval_s=0.1"], 120)
    check(p.returncode == 0, f"piped run exit code {p.returncode}")
    text = p.stdout + p.stderr
    check("\r" not in text and "\x1b" not in text, "piped: no carriage returns or escape codes")
    rows = re.findall(r"^\[\d\d:\d\d:\d\d\] \[ *\d+\.\ds\] steps .* SPS \| return", p.stdout, re.M)
    check(len(rows) >= 2, f"piped: {len(rows)} timestamped status lines")
    out_dir = os.path.join(args.workdir, f"t-{uuid.uuid4().hex[:8]}")
    cmd = command(args, 4, ["run.total_env_steps=2000000", "run.log_interval_s=0.1"], out_dir)
    env = {k: v for k, v in ENV.items() if k != "CI"}
    env["TERM"] = "xterm"
    code, seen = run_on_pty(cmd, env, 120)
    check(code == 0, f"terminal run exit code {code}")
    bars = [b for b in re.findall(r"\r([^\r\n\x1b]*)\x1b\[K", seen) if "steps" in b]
    check(len(bars) >= 2, f"terminal: {len(bars)} bar redraws")
    widest = max(len(b) for b in bars)
    # A full status line is wider than 120 columns, so the bar takes more than 80 of them only if
    # the width was read from the terminal.
    check(80 < widest <= 119, f"terminal: every bar fits 120 columns and uses more than 80 (widest {widest})")
    # Cleared: "\r\x1b[K" right before the line (a bar itself ends in "\x1b[K", so a line glued to it
    # would end its 4 preceding characters with "\x1b[K" too, without the "\r").
    logs = re.findall(r"(.{0,4})\[\d\d:\d\d:\d\d\.\d{3}\] \[rank", seen, re.S)
    glued = [x for x in logs if not x.endswith("\r\x1b[K")]
    check(logs and not glued, f"terminal: all {len(logs)} log lines clear the bar first ({len(glued)} glued)")
    finals = re.findall(r"(.{0,4})\[\d\d:\d\d:\d\d\] \[ *\d+\.\ds\] steps", seen, re.S)
    check(len(finals) == 1 and finals[0].endswith("\r\x1b[K"),
          f"terminal: the final status line clears the bar first ({finals})")


def case_ctrl_c_interrupts(args):
    # Ctrl-C on the terminal running mpirun (a pseudo-terminal here, mpirun its foreground job):
    # Open MPI puts each rank in a process group of its own, so only mpirun would get the SIGINT
    # and its SIGTERM to the ranks would look like a lost node. The ranks join mpirun's group, so
    # the run stops as "interrupted" (never "aborted" or "preempted"), with model.pt and a summary.
    out_dir = os.path.join(args.workdir, f"t-{uuid.uuid4().hex[:8]}")
    d = os.path.join(out_dir, "run")
    cmd = command(args, 4, ["run.total_env_steps=1000000000", "run.log_interval_s=0.2"], out_dir)
    # b"\x03" is what the terminal sends for Ctrl-C (ISIG: SIGINT to the foreground process group)
    code, seen = run_on_pty(cmd, ENV, 80, until=lambda: wait_for_rows(d, 3, 120), keys=b"\x03")
    out = seen.replace("\r", "")
    sys.stdout.write(out[-3000:])
    print(f"mpirun exited with {code}")
    s = summary(d)
    check(s["stop_reason"] == "interrupted", f"stop_reason {s['stop_reason']} (interrupted expected)")
    check("Ctrl-C stops the run as \"interrupted\"" in out, "learner 0 says it joined mpirun's foreground group")
    check("preempted" not in out and "a rank or a node was lost" not in out, "not taken for a preemption or a lost node")
    check(os.path.getsize(os.path.join(d, "model.pt")) > 0, "model.pt saved")
    left = ranks_left(out_dir)
    check(not left, f"no rank left running ({left})")


if __name__ == "__main__":
    mpi_test.main(globals())
