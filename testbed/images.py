"""Container images for the real node, built from Debian packages without a registry.

Called by `python -m testbed images` (and so by `testbed/build.sh images`,
`make testbed-build`) and by `node.RealNode` when it imports them. Each image
is one uncompressed layer: a root file system made by `mmdebstrap` from
pinned Debian packages (versions in `versions.env`), packed with an image
config into an OCI archive that `ctr images import` takes. Builds are cached
under `$TESTBED_CACHE/images/<name>-<tag>/`, keyed by a hash of the image's
spec and of the files it copies in; `SOURCE_DATE_EPOCH` makes a rebuild from
the same packages produce the same layer, and the manifest digest of every
build is recorded next to it (`digest`), so a change shows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from testbed.layout import PACKAGE_DIR

#: Bump when the way images are built changes (every image is rebuilt).
BUILDER_VERSION = "1"
#: Registry-less names: nothing ever pulls them, the node has them imported.
REGISTRY = "testbed.local"
#: Timestamps in every layer and config (2026-01-01), for reproducible builds.
SOURCE_DATE_EPOCH = 1767225600
MIRRORS = {
    "bookworm": [
        "deb http://deb.debian.org/debian bookworm main",
        "deb http://deb.debian.org/debian bookworm-updates main",
        "deb http://deb.debian.org/debian-security bookworm-security main",
    ],
    "trixie": [
        "deb http://deb.debian.org/debian trixie main",
        "deb http://deb.debian.org/debian trixie-updates main",
        "deb http://deb.debian.org/debian-security trixie-security main",
    ],
}
# Left out of every image: documentation, translations, and LLVM (only
# PostgreSQL's optional JIT uses it; without llvmjit.so the server runs without JIT).
EXCLUDES = ("/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*")
TRIM = (
    "usr/lib/x86_64-linux-gnu/libLLVM*",
    "usr/lib/x86_64-linux-gnu/libz3.so*",
    "usr/lib/postgresql/*/lib/llvmjit*",
    "usr/lib/postgresql/*/lib/bitcode",
    "var/cache/apt/*",
    "var/lib/apt/lists/*",
    "var/log/*",
)
IMAGE_FILES = PACKAGE_DIR / "images"


class ImageBuildError(RuntimeError):
    """An image could not be built; the message names the image and the step."""


@dataclass(frozen=True)
class ImageSpec:
    """One image: Debian packages (pinned by versions.env keys) and its config."""

    name: str
    tag: str
    suite: str
    packages: tuple[str, ...]  # versions.env keys: DEB_<PACKAGE>; the value is the version
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    user: str = ""
    # Files of testbed/images/ copied to these paths.
    files: dict[str, str] = field(default_factory=dict)
    # Another image whose root file system this one carries under /opt/<name>.
    carries: str = ""
    # Shell run on the build host before packing ($1 the new root,
    # $TESTBED_IMAGES the directory testbed/images/).
    customize: str = ""
    # When set, the layer holds only these paths of the root file system.
    keep: tuple[str, ...] = ()
    # A user created before any package is installed: (name, uid, home).
    account: tuple[str, int, str] | None = None

    @property
    def ref(self) -> str:
        return f"{REGISTRY}/{self.name}:{self.tag}"

    @property
    def key(self) -> str:
        return f"{self.name}-{self.tag}"


_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _postgres(major: str, suite: str) -> ImageSpec:
    return ImageSpec(
        name="postgresql",
        tag=major,
        suite=suite,
        packages=(f"postgresql-{major}",),
        entrypoint=("/usr/local/bin/postgres-entrypoint",),
        cmd=("postgres",),
        env=(f"PATH=/usr/lib/postgresql/{major}/bin:{_PATH}", "PGDATA=/var/lib/postgresql/data"),
        files={"postgres-entrypoint": "/usr/local/bin/postgres-entrypoint"},
        # uid 999, as the usual postgres image: the ReplicatedDB role runs its
        # clone step as 999 and gives volumes fsGroup 999.
        account=("postgres", 999, "/var/lib/postgresql"),
        # The cluster postgresql-common makes (the entry point makes its own),
        # and the snake-oil key ssl-cert generates: random at every build, and
        # unused (initdb leaves ssl off).
        customize=(
            'rm -rf "$1"/var/lib/postgresql/*/main "$1"/etc/postgresql/*/main '
            '"$1"/etc/ssl/certs/ssl-cert-snakeoil.pem "$1"/etc/ssl/private/ssl-cert-snakeoil.key'
        ),
    )


def specs() -> dict[str, ImageSpec]:
    """Every image the examples use, by key (NAME-TAG)."""
    images = [
        _postgres("15", "bookworm"),
        _postgres("17", "trixie"),
        ImageSpec(
            name="postgresql-upgrade",
            tag="15-to-17",
            suite="trixie",
            packages=("postgresql-17",),
            entrypoint=("/usr/local/bin/docker-upgrade",),
            env=(f"PATH=/usr/lib/postgresql/17/bin:{_PATH}",),
            files={"pg-upgrade": "/usr/local/bin/docker-upgrade"},
            account=("postgres", 999, "/var/lib/postgresql"),
            carries="postgresql-15",
            customize='sh "$TESTBED_IMAGES/old-major" "$1" 15',
        ),
        ImageSpec(
            name="memcached",
            tag="1.6",
            suite="bookworm",
            packages=("memcached",),
            entrypoint=("memcached",),
            user="memcache",
        ),
        ImageSpec(
            name="nginx",
            tag="1.22",
            suite="bookworm",
            packages=("nginx-light",),
            entrypoint=("nginx", "-g", "daemon off;"),
            # Logs to the container's output, as usual for an image.
            customize=(
                'mkdir -p "$1/var/log/nginx"; '
                'ln -sf /dev/stdout "$1/var/log/nginx/access.log"; '
                'ln -sf /dev/stderr "$1/var/log/nginx/error.log"'
            ),
        ),
        ImageSpec(name="awscli", tag="2.9", suite="bookworm", packages=("awscli",)),
        # The sandbox ("pause") image of every pod: catatonit, statically linked.
        ImageSpec(
            name="pause",
            tag="catatonit",
            suite="bookworm",
            packages=("catatonit",),
            entrypoint=("/usr/bin/catatonit", "-P"),
            keep=("usr/bin/catatonit",),
        ),
    ]
    return {spec.key: spec for spec in images}


#: The operator's environment for the examples on the testbed: each
#: RELATED_IMAGE_<NAME> the example roles read (docs/examples/README.md,
#: "Images"), by the key of the image that serves it.
RELATED_IMAGES = {
    "RELATED_IMAGE_POSTGRES_15": "postgresql-15",
    "RELATED_IMAGE_POSTGRES_17": "postgresql-17",
    "RELATED_IMAGE_POSTGRES_CLIENT": "postgresql-17",
    "RELATED_IMAGE_POSTGRES_UPGRADE_15_TO_17": "postgresql-upgrade-15-to-17",
    "RELATED_IMAGE_MEMCACHED": "memcached-1.6",
    "RELATED_IMAGE_NGINX": "nginx-1.22",
    "RELATED_IMAGE_AWS_CLI": "awscli-2.9",
}


def related_images() -> dict[str, str]:
    """RELATED_IMAGE_<NAME> -> image reference, for the operator's environment."""
    refs = specs()
    return {env: refs[key].ref for env, key in RELATED_IMAGES.items()}


def pinned(spec: ImageSpec, versions: dict[str, str]) -> list[str]:
    """`package=version` for apt, from versions.env (DEB_<PACKAGE> with - as _)."""
    out = []
    for package in spec.packages:
        key = "DEB_" + package.upper().replace("-", "_")
        if key not in versions:
            raise ImageBuildError(f"testbed/versions.env: no {key} (version of {package})")
        out.append(f"{package}={versions[key]}")
    return out


def spec_hash(spec: ImageSpec, versions: dict[str, str]) -> str:
    digest = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode())
    digest.update(json.dumps(pinned(spec, versions)).encode())
    if spec.carries:
        # The carried image is part of this one: its changes are this one's.
        digest.update(spec_hash(specs()[spec.carries], versions).encode())
    for source in sorted(spec.files):
        digest.update((IMAGE_FILES / source).read_bytes())
    if "old-major" in spec.customize:
        digest.update((IMAGE_FILES / "old-major").read_bytes())
    digest.update(BUILDER_VERSION.encode())
    return digest.hexdigest()[:16]
