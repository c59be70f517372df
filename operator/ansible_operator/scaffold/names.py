"""The names a user passes to `init` and `create api`, checked as Kubernetes checks them.

Called first by :mod:`ansible_operator.scaffold.project` and
:mod:`ansible_operator.scaffold.api`, before anything is staged: every
function here raises :class:`~ansible_operator.errors.ConfigError` with a
one-line message that names the flag (``--domain: ...``) and what is wrong.
:class:`ApiNames` then derives everything the templates need from one
group/version/kind: the full group, the plural and the lower-case names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_operator.errors import ConfigError

# apimachinery's validation: IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL_MAX = 63
_SUBDOMAIN_MAX = 253
# kubebuilder's version rule: v1, v2beta3, v10alpha1.
_VERSION = re.compile(r"v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?")
# A kind is CamelCase: an upper-case letter, then letters and digits.
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")


def _fail(flag: str, value: str, problem: str) -> ConfigError:
    return ConfigError(f"{flag}: {value!r} {problem}")


def check_dns1123_label(value: str, *, flag: str) -> str:
    """A DNS-1123 label (a project name): lower-case alphanumerics and '-', at most 63."""
    if not value:
        raise ConfigError(f"{flag}: must not be empty")
    if len(value) > _LABEL_MAX:
        raise _fail(flag, value, f"is longer than {_LABEL_MAX} characters")
    if not _DNS1123_LABEL.fullmatch(value):
        raise _fail(
            flag,
            value,
            "is not a DNS-1123 label (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit)",
        )
    return value


def check_dns1123_subdomain(value: str, *, flag: str) -> str:
    """A DNS-1123 subdomain (a domain or API group): dot-separated labels, at most 253."""
    if not value:
        raise ConfigError(f"{flag}: must not be empty")
    if len(value) > _SUBDOMAIN_MAX:
        raise _fail(flag, value, f"is longer than {_SUBDOMAIN_MAX} characters")
    for label in value.split("."):
        if not label or len(label) > _LABEL_MAX or not _DNS1123_LABEL.fullmatch(label):
            raise _fail(
                flag,
                value,
                "is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', "
                "each part starting and ending with a letter or digit)",
            )
    return value


def check_version(value: str, *, flag: str = "--version") -> str:
    """An API version as Kubernetes orders them: v1, v1beta1, v2alpha3."""
    if not value:
        raise ConfigError(f"{flag}: must not be empty")
    if not _VERSION.fullmatch(value):
        raise _fail(
            flag,
            value,
            "is not an API version (v<N>, v<N>alpha<M> or v<N>beta<M>, e.g. v1alpha1)",
        )
    return value


def check_kind(value: str, *, flag: str = "--kind") -> str:
    """A kind in CamelCase whose lower-case form is a DNS-1035 label (a resource name)."""
    if not value:
        raise ConfigError(f"{flag}: must not be empty")
    if not _KIND.fullmatch(value):
        raise _fail(
            flag,
            value,
            "is not CamelCase (an upper-case letter, then letters and digits, e.g. Memcached)",
        )
    lower = value.lower()
    if len(pluralize(lower)) > _LABEL_MAX or not _DNS1035_LABEL.fullmatch(lower):
        raise _fail(flag, value, f"is too long: its plural must fit in {_LABEL_MAX} characters")
    return value


def pluralize(word: str) -> str:
    """English plural of a lower-case kind, as kubebuilder's pluralizer gives for common words."""
    irregular = {"person": "people", "child": "children", "man": "men", "woman": "women"}
    if word in irregular:
        return irregular[word]
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


@dataclass(frozen=True)
class ApiNames:
    """One API (group, version, kind) of a project and every name derived from it."""

    group: str
    version: str
    kind: str
    domain: str

    @classmethod
    def checked(cls, *, group: str, version: str, kind: str, domain: str) -> ApiNames:
        check_dns1123_subdomain(group, flag="--group")
        check_version(version)
        check_kind(kind)
        check_dns1123_subdomain(f"{group}.{domain}", flag="--group (joined with the domain)")
        return cls(group=group, version=version, kind=kind, domain=domain)

    @property
    def full_group(self) -> str:
        return f"{self.group}.{self.domain}"

    @property
    def lower(self) -> str:
        return self.kind.lower()

    @property
    def plural(self) -> str:
        return pluralize(self.lower)

    @property
    def api_version(self) -> str:
        return f"{self.full_group}/{self.version}"

    @property
    def sample_file(self) -> str:
        """The sample's file name in config/samples, as kubebuilder names it."""
        return f"{self.group}_{self.version}_{self.lower}.yaml"

    def template_values(self) -> dict[str, str]:
        return {
            "group": self.group,
            "full_group": self.full_group,
            "version": self.version,
            "kind": self.kind,
            "kind_lower": self.lower,
            "plural": self.plural,
            "api_version": self.api_version,
            "domain": self.domain,
            "object_var": "_" + re.sub(r"[.-]", "_", self.full_group) + "_" + self.lower,
            "sample_file": self.sample_file,
        }
