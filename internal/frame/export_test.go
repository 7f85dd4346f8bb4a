package frame

// Next is Scan returning the frame, for the tests.
func (s *Scanner) Next() (Frame, error) {
	var f Frame
	err := s.Scan(&f)
	return f, err
}
