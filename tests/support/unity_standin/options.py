"""The stand-in's command line (see standin.py's docstring): what it reads, never failing."""

from __future__ import annotations

from typing import Optional

SEEKER = "Seeker?team=0"
PICKER = "Picker?team=0"
MATES = "Mates?team=0"
RECALL = "Recall?team=0"
CROWD = "Crowd?team=0"
IMAGE_SIZE = 20

_VALUE_OPTIONS = {
    "--mlagents-port": int,
    "--agents": int,
    "--behaviors": str,
    "--episode-length": int,
    "--crash-at": int,
    "--hang-at": int,
    "--quit-at": int,
    "--once-file": str,
    "--comm-version": str,
    "--editor-port": int,
    "--connect-timeout": float,
    "--step-delay": float,
    "--visual-layout": str,
    "--visual-compression": str,
    "--image-size": str,
    "--returns-file": str,
}
_FLAG_OPTIONS = {"--visual", "--visual-only", "--no-stats", "-nographics", "-batchmode"}
VISUAL_LAYOUTS = ("hwc", "chw")
VISUAL_COMPRESSIONS = ("png", "none")


class Options:
    def __init__(self) -> None:
        self.mlagents_port: Optional[int] = None
        self.agents = 4
        self.behaviors = "Seeker"
        self.episode_length = 20
        self.crash_at: Optional[int] = None
        self.hang_at: Optional[int] = None
        self.quit_at: Optional[int] = None
        self.once_file: Optional[str] = None
        self.comm_version = "1.5.0"
        self.editor_port = 5004
        self.connect_timeout = 30.0
        self.step_delay = 0.0
        self.visual = False
        self.visual_only = False
        self.visual_layout = "hwc"
        self.visual_compression = "png"
        self.image_size = f"{IMAGE_SIZE}x{IMAGE_SIZE}"
        self.image_height = IMAGE_SIZE
        self.image_width = IMAGE_SIZE
        self.no_stats = False
        self.returns_file: Optional[str] = None
        self.nographics = False
        self.batchmode = False
        self.log_file: Optional[str] = None
        self.warnings: list[str] = []

    @property
    def port(self) -> int:
        return self.mlagents_port if self.mlagents_port is not None else self.editor_port

    def behavior_names(self) -> list[str]:
        names = []
        known = {name.split("?")[0].lower(): name for name in (SEEKER, PICKER, MATES, RECALL, CROWD)}
        for part in self.behaviors.split(","):
            key = part.strip().split("?")[0].lower()
            if key in known:
                if known[key] not in names:
                    names.append(known[key])
            elif key:
                self.warnings.append(f"unknown behavior {part!r} ignored")
        return names or [SEEKER]


def parse_args(argv: list[str]) -> Options:
    """Reads the options it knows; anything else is ignored (never fails)."""
    opts = Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg.lower() == "-logfile":
            if i + 1 < len(argv):
                opts.log_file = argv[i + 1]
                i += 1
        elif arg in _FLAG_OPTIONS:
            setattr(opts, arg.lstrip("-").replace("-", "_"), True)
        elif name in _VALUE_OPTIONS:
            if eq:
                raw: Optional[str] = inline
            elif i + 1 < len(argv):
                raw = argv[i + 1]
                i += 1
            else:
                raw = None
            if raw is None:
                opts.warnings.append(f"{name} without a value ignored")
            else:
                try:
                    setattr(opts, name[2:].replace("-", "_"), _VALUE_OPTIONS[name](raw))
                except ValueError:
                    opts.warnings.append(f"{name} {raw!r}: bad value ignored")
        i += 1
    if opts.agents < 1:
        opts.warnings.append(f"--agents {opts.agents} raised to 1")
        opts.agents = 1
    if opts.episode_length < 1:
        opts.episode_length = 1
    opts.visual = opts.visual or opts.visual_only
    opts.visual_layout = opts.visual_layout.lower()
    if opts.visual_layout not in VISUAL_LAYOUTS:
        opts.warnings.append(f"--visual-layout {opts.visual_layout!r} unknown: hwc")
        opts.visual_layout = "hwc"
    opts.visual_compression = opts.visual_compression.lower()
    if opts.visual_compression not in VISUAL_COMPRESSIONS:
        opts.warnings.append(f"--visual-compression {opts.visual_compression!r} unknown: png")
        opts.visual_compression = "png"
    try:
        sizes = [int(v) for v in opts.image_size.lower().split("x")]
        if len(sizes) == 1:
            sizes *= 2
        height, width = sizes
        if height < 1 or width < 1:
            raise ValueError
        opts.image_height, opts.image_width = height, width
    except ValueError:
        opts.warnings.append(f"--image-size {opts.image_size!r}: bad value ignored")
    return opts
