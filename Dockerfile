# This project's operator image: the base image (operator/Dockerfile) plus
# this project's watches.yaml, roles/ and playbooks/, exactly as an Operator
# SDK project's Dockerfile builds on quay.io/operator-framework/ansible-operator.
#
#   docker build -f operator/Dockerfile -t ansible-operator-base:v0.1.0 .
#   docker build -t REGISTRY/NAME:TAG .
#
# No requirements.yml step: these roles use only kubernetes.core and
# operator_sdk.util, which the base image ships, and config/manager mounts an
# emptyDir on ~/.ansible (read-only root filesystem), which would hide
# collections installed there (docs/migrating.md). docs/deploy.md explains
# the image; tests/deploy/test_dockerfile_install.py replays both files into a
# fresh virtualenv and runs the result against a cluster;
# tests/deploy/test_dockerfile_lint.py lints them.
FROM ansible-operator-base:v0.1.0

COPY watches.yaml ${HOME}/watches.yaml
COPY roles/ ${HOME}/roles/
COPY playbooks/ ${HOME}/playbooks/
