"""Augmentation settings that are given but change nothing with the other settings.

MXNet accepts them silently (``random_resized_crop=True`` with its default area and aspect
ranges is the best known: every crop is the whole image, so the step is skipped). Each entry of
``RULES`` says which setting, when it counts as set, and which other setting takes its effect
away; ``no_effect(config)`` lists what applies to a config and ``warn_no_effect(config, owner)``
warns once for each (a loader calls it once, when it is built). Only what is decided by the
settings alone is listed, not what depends on the images (``rand_crop`` on images no larger than
the output, say).
"""

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Callable, List, Optional

from .config import TORCHVISION_CROP, AugmentConfig

__all__ = ["NoEffect", "NoEffectWarning", "RULES", "Rule", "no_effect", "warn_no_effect"]


class NoEffectWarning(UserWarning):
    """An augmentation setting was given but the other settings leave it without effect."""


@dataclass(frozen=True)
class Rule:
    """``setting`` is set when ``is_set(config)``; ``disabled_by(config)`` names what takes its
    effect away (None: it has one), and ``advice`` says what to do."""

    setting: str
    is_set: Callable[[AugmentConfig], bool]
    disabled_by: Callable[[AugmentConfig], Optional[str]]
    advice: str


@dataclass(frozen=True)
class NoEffect:
    """One setting without effect: which, what disables it, what to do."""

    setting: str
    disabled_by: str
    advice: str

    def message(self, owner: str = "") -> str:
        prefix = f"{owner}: " if owner else ""
        return (f"{prefix}{self.setting} has no effect: {self.disabled_by}; {self.advice}")


def _default(name):
    return AugmentConfig.__dataclass_fields__[name].default


def _trivial_crop(c):
    if c.random_resized_active:
        return None
    return ("min_random_area=max_random_area=1 and max_aspect_ratio=0 (ImageRecordIter's "
            "defaults) make every crop the whole image, so the step is skipped")


def _no_rrc(c):
    return None if c.random_resized_crop else "random_resized_crop is False (only it reads them)"


def _mirror_always(c):
    return "mirror=True mirrors every image" if c.mirror else None


def _fixed_angle(c):
    if c.rotate_list:
        return f"rotate_list={c.rotate_list} chooses the angle"
    if c.rotate > 0:
        return f"rotate={c.rotate} fixes the angle"
    return None


def _angle_list(c):
    return f"rotate_list={c.rotate_list} chooses the angle" if c.rotate_list else None


def _no_border(c):
    if c.pad > 0 or c.affine_active:
        return None
    return "pad=0 and no affine warp: no border is added for it to colour"


_CROP_ADVICE = ("for torchvision's RandomResizedCrop give min_random_area={min_random_area}, "
                "min_aspect_ratio={min_aspect_ratio:.4g}, max_aspect_ratio={max_aspect_ratio:.4g} "
                "(recpipe.torch's defaults)").format(**TORCHVISION_CROP)

RULES = (
    Rule("random_resized_crop=True", lambda c: c.random_resized_crop, _trivial_crop,
         _CROP_ADVICE),
    Rule("min_random_area/max_random_area",
         lambda c: (c.min_random_area, c.max_random_area) != (1.0, 1.0), _no_rrc,
         "add random_resized_crop=True, or leave them out"),
    Rule("rand_mirror=True", lambda c: c.rand_mirror, _mirror_always,
         "give one of mirror and rand_mirror"),
    Rule("max_rotate_angle", lambda c: c.max_rotate_angle > 0, _fixed_angle,
         "give one of max_rotate_angle, rotate and rotate_list"),
    Rule("rotate", lambda c: c.rotate > 0, _angle_list, "give one of rotate and rotate_list"),
    Rule("fill_value", lambda c: c.fill_value != _default("fill_value"), _no_border,
         "add pad=N (or an affine warp), or leave fill_value out"),
)


def no_effect(config: Optional[AugmentConfig]) -> List[NoEffect]:
    """The settings of ``config`` that are given but have no effect (``RULES``, in order)."""
    if config is None:
        return []
    found = []
    for rule in RULES:
        if rule.is_set(config):
            reason = rule.disabled_by(config)
            if reason is not None:
                found.append(NoEffect(rule.setting, reason, rule.advice))
    return found


def warn_no_effect(config: Optional[AugmentConfig], owner: str = "") -> List[NoEffect]:
    """Warn (``NoEffectWarning``, pointing at the caller's code outside recpipe) once for each
    setting of ``config`` without effect; returns them."""
    found = no_effect(config)
    for item in found:
        warnings.warn(item.message(owner), NoEffectWarning, stacklevel=_outside_recpipe())
    return found


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _outside_recpipe():
    """The ``stacklevel`` of the first frame, from warn_no_effect's caller up, outside recpipe
    (the user's line that built the loader, however deep recpipe's own calls go)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    return level
