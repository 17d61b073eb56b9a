#pragma once
#include "seqinbox/claim/check_then_insert.hpp"
#include "seqinbox/claim/concept.hpp"
#include "seqinbox/claim/insert_first.hpp"
