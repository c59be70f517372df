# The operator image: ansible-operator with its pinned dependencies, the
# kubernetes.core and operator_sdk.util collections, and this project's
# watches.yaml, roles/ and playbooks/.
#
#   docker build -t REGISTRY/NAME:TAG .
#
# docs/deploy.md explains the choices. tests/deploy/test_dockerfile_install.py
# replays the install steps of this file (all but the apt-get and useradd
# lines) into a fresh virtualenv and runs the result against a cluster;
# tests/deploy/test_dockerfile_lint.py lints it.

# --- build stage: one virtualenv holding everything that runs -----------------
FROM python:3.11.14-slim-bookworm AS builder

WORKDIR /build
# What `pip install .` needs, and nothing else, so that changing a role does
# not re-run this layer.
COPY pyproject.toml README.md ./
COPY requirements/ requirements/
COPY operator/ operator/
# Not editable, no dev extras, every version pinned by the constraints file.
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir -c requirements/constraints.txt .

# kubernetes.core, extracted from the `ansible` wheel named in
# requirements/collections.txt (sha256-checked), and our own operator_sdk.util
# (collections/), copied into the virtualenv's site-packages where Ansible
# finds them without any ANSIBLE_COLLECTIONS_PATH.
# Then pip and setuptools leave the virtualenv: nothing needs them at run time.
COPY scripts/install_collections.py scripts/
COPY collections/ collections/
RUN /opt/venv/bin/python scripts/install_collections.py --copy-own --cache /build/cache \
 && /opt/venv/bin/python -m pip uninstall --yes pip setuptools

# --- the image ----------------------------------------------------------------
FROM python:3.11.14-slim-bookworm

# tini runs as PID 1: it passes SIGTERM on to the operator and reaps the
# Ansible processes a cancelled or timed-out run leaves behind, which are
# re-parented to PID 1 (docs/runner.md).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini=0.19.0-1+b3 \
 && rm -rf /var/lib/apt/lists/*

# The Go operator image's user: uid 1001, group 0, so that clusters which run
# containers under an arbitrary uid in group 0 (OpenShift) work too. Only
# ~/.ansible (Ansible's temporary files) is writable; config/manager mounts
# emptyDirs on it and on /tmp so that the root filesystem can be read-only.
RUN useradd --uid 1001 --gid 0 --home-dir /opt/ansible --no-create-home \
      --shell /usr/sbin/nologin ansible \
 && mkdir -p /opt/ansible/.ansible \
 && chown 1001:0 /opt/ansible/.ansible \
 && chmod 0770 /opt/ansible/.ansible

COPY --from=builder /opt/venv /opt/venv

# USER: Python's getpass.getuser() (kopf, Ansible) reads it before looking the
# uid up in /etc/passwd, which has no entry for an arbitrary uid.
# ANSIBLE_ASYNC_DIR: async tasks write under ~/.ansible, like the rest of Ansible.
ENV HOME=/opt/ansible \
    USER=ansible \
    PATH=/opt/venv/bin:$PATH \
    ANSIBLE_ASYNC_DIR=/opt/ansible/.ansible/async

WORKDIR /opt/ansible
COPY watches.yaml ./
COPY roles/ roles/
COPY playbooks/ playbooks/

USER 1001:0

ENTRYPOINT ["tini", "--", "ansible-operator", "run", "--watches-file=./watches.yaml"]
