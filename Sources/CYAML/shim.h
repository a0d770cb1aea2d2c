// libyaml, Debian package libyaml-dev. Only YAMLDocument imports this module.
#ifndef CYAML_SHIM_H
#define CYAML_SHIM_H
#include <yaml.h>
#endif
