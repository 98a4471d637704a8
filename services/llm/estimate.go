package llm

// Token estimates, for deciding before a provider has reported usage.
//
// EstimateTokens counts about one token per four bytes of text, the rule of
// thumb of the BPE tokenizers the shipped providers use, plus a few tokens of
// framing per message. It is deliberately simple and never calls a tokenizer:
// callers compare it with a window, where being a few percent off does not
// matter, and prefer the provider's reported usage when there is one.

const (
	bytesPerToken   = 4
	messageOverhead = 4
)

// EstimateText estimates the tokens of s.
func EstimateText(s string) int { return (len(s) + bytesPerToken - 1) / bytesPerToken }

// EstimateMessage estimates the tokens message m takes in a request.
func EstimateMessage(m Message) int {
	n := messageOverhead + EstimateText(m.Content) + EstimateText(m.Reasoning)
	for _, c := range m.ToolCalls {
		n += messageOverhead + EstimateText(c.Name) + EstimateText(c.Arguments)
	}
	return n
}

// EstimateRequest estimates the prompt tokens of req: system prompt, tool
// specs and history.
func EstimateRequest(req Request) int {
	n := EstimateText(req.System)
	for _, t := range req.Tools {
		n += messageOverhead + EstimateText(t.Name) + EstimateText(t.Description) + EstimateText(string(t.Parameters))
	}
	for i := range req.History.Len() {
		n += EstimateMessage(*req.History.at(i))
	}
	return n
}

// Windowed is implemented by providers that know the context window of
// their models, in tokens: what a request's prompt and answer may take
// together. ContextWindow returns 0 when it does not know.
type Windowed interface {
	ContextWindow(model string) int
}

// ContextWindow returns the context window the named provider reports for
// model, or 0 when the provider is not registered or does not say.
func (s *Service) ContextWindow(provider, model string) int {
	p, _ := s.Provider(provider)
	if w, ok := p.(Windowed); ok {
		return w.ContextWindow(model)
	}
	return 0
}
