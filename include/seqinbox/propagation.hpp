#pragma once
#include "seqinbox/propagation/concept.hpp"
#include "seqinbox/propagation/not_supported.hpp"
#include "seqinbox/propagation/required.hpp"
#include "seqinbox/propagation/requires_new.hpp"
