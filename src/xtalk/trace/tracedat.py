"""Read a trace-cmd `trace.dat` (version 6, trace-cmd.dat.v6(5)) as the agent writes it:
the kernel's ring-buffer pages decoded with the event formats the file carries, the way
libtraceevent does. Times are the ring buffer's own ns on the instance's clock (mono:
CLOCK_MONOTONIC, as the job table).

The columns are those of the text parser (trace/parse.py): ts_ns, cpu, comm, pid, event and the
event's fields, under the same names (sched_waking's `pid` as `target_pid`, an hrtimer's
`function` as `name`, resolved through the file's kallsyms).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"\x17\x08\x44tracing"
# Ring-buffer event header types (kernel/trace/ring_buffer.c).
PADDING, TIME_EXTEND, TIME_STAMP = 29, 30, 31
TS_SHIFT = 27
MISSED_FLAGS = (1 << 31) | (1 << 30)  # in a page's commit word
SOFTIRQS = ["HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"]
# The text rendering's names for fields the kernel names otherwise.
_TARGET = {"comm": "target_comm", "pid": "target_pid"}
RENAME = {"sched_wakeup": _TARGET, "sched_waking": _TARGET, "sched_wakeup_new": _TARGET, "sched_migrate_task": _TARGET,
          "hrtimer_start": {"function": "name"}, "hrtimer_expire_entry": {"function": "name"}}
BASE = ("ts_ns", "cpu", "comm", "pid", "event")
_FIELD = re.compile(r"^\s*field:(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d);", re.M)
_INTS = {(1, 0): "B", (1, 1): "b", (2, 0): "H", (2, 1): "h", (4, 0): "I", (4, 1): "i", (8, 0): "Q", (8, 1): "q"}


class TraceDatError(ValueError):
    """The file is not a trace.dat this reader understands, or its header is damaged (the
    message says where). Damage past the header (pages cut short or garbled) is read around
    and listed in `TraceDat.damage` instead."""


@dataclass
class Field:
    name: str
    offset: int
    size: int
    signed: bool
    kind: str  # "int", "str" (char array), "loc" (__data_loc), "rel" (__rel_loc), "ptr", "raw"


@dataclass
class Format:
    """One event's layout, from its format file."""

    id: int
    system: str
    name: str
    fields: list[Field]
    print_fmt: str = ""


def _format(text: str, system: str) -> Format:
    name = re.search(r"^name: (\S+)", text, re.M)
    ident = re.search(r"^ID: (\d+)", text, re.M)
    if name is None or ident is None:
        raise TraceDatError(f"an event format of '{system}' has no name or ID")
    fields = []
    for m in _FIELD.finditer(text):
        decl, off, size, signed = m["decl"].strip(), int(m["offset"]), int(m["size"]), m["signed"] == "1"
        fname = re.sub(r"\[.*\]$", "", decl.split()[-1]).lstrip("*")
        if fname.startswith("common_") and fname != "common_pid":
            continue
        if decl.startswith("__data_loc"):
            kind = "loc"
        elif decl.startswith("__rel_loc"):
            kind = "rel"
        elif decl.endswith("]") and decl.split()[0] in ("char", "const", "unsigned") and "char" in decl:
            kind = "str"
        elif "*" in decl:
            kind = "ptr"
        elif (size, int(signed)) in _INTS:
            kind = "int"
        else:
            kind = "raw"
        fields.append(Field(fname, off, size, signed, kind))
    pf = re.search(r"^print fmt: (.*)$", text, re.M)
    return Format(int(ident[1]), system, name[1], fields, pf[1] if pf else "")


@dataclass
class TraceDat:
    """A trace.dat's header: page size, event formats, symbols, process names, and where
    each CPU's pages lie."""

    path: Path
    page_size: int
    formats: dict[int, Format]
    cmdlines: dict[int, str]
    clock: str
    cpus: list[tuple[int, int]]  # (offset, size) per CPU
    data: bytes = field(repr=False)
    kallsyms: bytes = field(default=b"", repr=False)
    #: What was read around (one line each, naming the file): cut-short or garbled pages.
    damage: list[str] = field(default_factory=list)
    _symbols: dict[int, str] = field(default_factory=dict, repr=False)

    def symbol(self, addr: int) -> str:
        """The kernel function at `addr` (as %ps prints it), or its hex address. Looked up
        in the file's kallsyms per address (a run's timers use a handful of functions)."""
        name = self._symbols.get(addr)
        if name is None:
            at = self.kallsyms.find(b"%016x " % addr)
            line = self.kallsyms[at:self.kallsyms.find(b"\n", at)].split() if at >= 0 else []
            name = self._symbols[addr] = line[2].decode(errors="replace") if len(line) >= 3 else f"0x{addr:x}"
        return name


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.d, self.pos, self.path = data, 0, path

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.d):
            raise TraceDatError(f"{self.path}: ends inside its header (at byte {self.pos}, {n} more expected)")
        b = self.d[self.pos:self.pos + n]
        self.pos += n
        return b

    def u(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def cstr(self) -> str:
        end = self.d.find(b"\0", self.pos)
        if end < 0:
            raise TraceDatError(f"{self.path}: unterminated string at byte {self.pos}")
        s = self.d[self.pos:end].decode(errors="replace")
        self.pos = end + 1
        return s

    def expect(self, tag: bytes) -> None:
        if self.take(len(tag)) != tag:
            name = tag.rstrip(b" \0").decode()
            raise TraceDatError(f"{self.path}: expected section {name} at byte {self.pos - len(tag)}")


def read(path: Path) -> TraceDat:
    """The header of trace.dat `path` (version 6, little-endian, 64-bit, flyrecord)."""
    path = Path(path)
    data = path.read_bytes()
    r = _Reader(data, path)
    if r.take(len(MAGIC)) != MAGIC:
        raise TraceDatError(f"{path}: not a trace-cmd trace.dat (bad magic)")
    version = r.cstr()
    if version != "6":
        raise TraceDatError(f"{path}: trace.dat version {version}; this reader knows version 6 (the agent's)")
    endian, long_size, page_size = r.u(1), r.u(1), r.u(4)
    if endian != 0 or long_size != 8:
        raise TraceDatError(f"{path}: a {'big' if endian else 'little'}-endian {long_size * 8}-bit trace; this reader knows little-endian 64-bit")
    r.expect(b"header_page\0")
    r.take(r.u(8))
    r.expect(b"header_event\0")
    r.take(r.u(8))
    formats = {}
    for _ in range(r.u(4)):
        f = _format(r.take(r.u(8)).decode(errors="replace"), "ftrace")
        formats[f.id] = f
    for _ in range(r.u(4)):
        system = r.cstr()
        for _ in range(r.u(4)):
            f = _format(r.take(r.u(8)).decode(errors="replace"), system)
            formats[f.id] = f
    kallsyms = r.take(r.u(4))
    r.take(r.u(4))  # printk formats
    cmdlines = {}
    for line in r.take(r.u(8)).decode(errors="replace").splitlines():
        pid, _, comm = line.partition(" ")
        if pid.isdigit():
            cmdlines[int(pid)] = comm
    ncpus = r.u(4)
    clock = ""
    tag = r.take(10)
    if tag == b"options  \0":
        while (opt := r.u(2)) != 0:
            body = r.take(r.u(4))
            if opt == 4:  # TRACECLOCK: the clock file, the selected one in brackets
                m = re.search(rb"\[(\S+)\]", body)
                clock = m[1].decode() if m else ""
        tag = r.take(10)
    if tag != b"flyrecord\0":
        raise TraceDatError(f"{path}: no flyrecord section (found {tag!r}); only recorded buffers are read")
    if page_size < 32:
        raise TraceDatError(f"{path}: a page size of {page_size} bytes")
    cpus, damage = [], []
    for i in range(ncpus):
        off, size = r.u(8), r.u(8)
        if off + size > len(data):
            whole = max(0, (len(data) - off) // page_size * page_size)
            damage.append(f"{path}: CPU {i}'s data ({size} bytes at byte {off}) runs past the end of the file "
                          f"({len(data)} bytes): cut short, its events after {whole} bytes are missing")
            size = whole
        cpus.append((off, size))
    return TraceDat(path, page_size, formats, cmdlines, clock, cpus, data, kallsyms, damage)


def _records(td: TraceDat, cpu: int):
    """(ts_ns, payload offset, payload length) of each data event in CPU `cpu`'s pages."""
    off, size = td.cpus[cpu]
    d, ps = td.data, td.page_size
    for page in range(off, off + size, ps):
        ts = int.from_bytes(d[page:page + 8], "little")
        commit = int.from_bytes(d[page + 8:page + 16], "little") & ~MISSED_FLAGS
        pos, end = page + 16, page + 16 + commit
        if end > page + ps:
            td.damage.append(f"{td.path}: CPU {cpu}: the page at byte {page} claims {commit} bytes of events, more than "
                             "a page holds: its events are left out")
            continue
        while pos + 4 <= end:
            hdr = int.from_bytes(d[pos:pos + 4], "little")
            type_len, delta = hdr & 0x1F, hdr >> 5
            if type_len == PADDING:
                if delta == 0:
                    break  # the rest of the page is empty
                pos += 4 + int.from_bytes(d[pos + 4:pos + 8], "little")  # a discarded event
            elif type_len == TIME_EXTEND:
                ts += (int.from_bytes(d[pos + 4:pos + 8], "little") << TS_SHIFT) + delta
                pos += 8
            elif type_len == TIME_STAMP:
                ts = (int.from_bytes(d[pos + 4:pos + 8], "little") << TS_SHIFT) | delta
                pos += 8
            else:
                ts += delta
                if type_len == 0:
                    length = int.from_bytes(d[pos + 4:pos + 8], "little") - 4
                    start = pos + 8
                else:
                    length = type_len * 4
                    start = pos + 4
                if length < 2 or start + length > end:
                    td.damage.append(f"{td.path}: CPU {cpu}: an event at byte {pos} runs past its page's data: "
                                     "the rest of that page is left out")
                    break
                yield ts, start, length
                pos = start + length


def _prev_state(fmt: Format):
    """prev_state as the kernel prints it ("S", "D", "R", "R+"), letters from its print fmt."""
    flags = [(int(v, 16), c) for v, c in re.findall(r'\{ (0x[0-9a-fA-F]+), "(\w)" \}', fmt.print_fmt)] or \
        [(1, "S"), (2, "D"), (4, "T"), (8, "t"), (0x10, "X"), (0x20, "Z"), (0x40, "P"), (0x80, "I")]
    preempt = max(v for v, _ in flags) << 1

    def render(v: int) -> str:
        s = "|".join(c for bit, c in flags if v & bit) or "R"
        return s + ("+" if v & preempt else "")
    return render


def _decoder(td: TraceDat, fmt: Format):
    """A function: event payload (bytes, start) -> {column: value}."""
    rename = RENAME.get(fmt.name, {})
    plan = []
    for f in fmt.fields:
        col = "pid" if f.name == "common_pid" else rename.get(f.name, f.name)
        if col in BASE and f.name != "common_pid":
            continue  # an unknown event's field would shadow a base column
        plan.append((f, col))
    state = _prev_state(fmt) if fmt.name == "sched_switch" else None

    def decode(d: bytes, s: int, n: int) -> dict:
        row = {}
        for f, col in plan:
            o = s + f.offset
            if f.kind in ("int", "ptr"):
                v = struct.unpack_from("<" + _INTS[(f.size, int(f.signed and f.kind == "int"))], d, o)[0]
            elif f.kind == "str":
                v = d[o:o + f.size].split(b"\0", 1)[0].decode(errors="replace")
            elif f.kind in ("loc", "rel"):
                loc = int.from_bytes(d[o:o + 4], "little")
                start = (loc & 0xFFFF) + (o + 4 - s if f.kind == "rel" else 0)
                v = d[s + start:s + start + (loc >> 16)].split(b"\0", 1)[0].decode(errors="replace")
            else:
                v = d[o:o + f.size].hex()
            row[col] = v
        if state is not None:
            row["prev_state"] = state(row["prev_state"])
        if fmt.name.startswith("hrtimer_"):
            if "name" in row:
                row["name"] = td.symbol(row["name"])
            row["hrtimer"] = f"{row['hrtimer']:016x}"
        elif fmt.name in ("softirq_entry", "softirq_exit", "softirq_raise"):
            row["name"] = SOFTIRQS[row["vec"]] if row["vec"] < len(SOFTIRQS) else str(row["vec"])
        elif fmt.name == "irq_handler_exit":
            row["ret"] = "handled" if row["ret"] else "unhandled"
        return row
    return decode


def rows(td: TraceDat):
    """One dict per event, in each CPU's order (parse.table sorts them by time)."""
    decoders = {}
    d = td.data
    for cpu in range(len(td.cpus)):
        for ts, s, n in _records(td, cpu):
            etype = int.from_bytes(d[s:s + 2], "little")
            fmt = td.formats.get(etype)
            if fmt is None:
                td.damage.append(f"{td.path}: CPU {cpu}: an event of type {etype} at byte {s}, which the file has no "
                                 "format for: left out")
                continue
            dec = decoders.get(etype) or decoders.setdefault(etype, _decoder(td, fmt))
            try:
                row = dec(d, s, n)
            except (struct.error, IndexError, KeyError):
                td.damage.append(f"{td.path}: CPU {cpu}: the {fmt.name} event at byte {s} does not fit its format: left out")
                continue
            pid = row.pop("pid")
            yield {"ts_ns": ts, "cpu": cpu, "comm": td.cmdlines.get(pid, "<idle>" if pid == 0 else "<...>"), "pid": pid,
                   "event": fmt.name, **row}
