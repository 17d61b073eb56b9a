#include <iostream>
int main() { std::cerr << "usage: seqinbox demo\n"; return 2; }
