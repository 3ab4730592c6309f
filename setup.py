"""The one compiled part, thinkwire._hot (see addon/thinkwire/hot.py). It is optional: where it
does not build (no C compiler), the install goes on and thinkwire runs on Python alone."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("thinkwire._hot", ["addon/thinkwire/_hot.c"], depends=["addon/thinkwire/_hot_spec.h"],
                             optional=True)])
